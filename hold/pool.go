// pool.go owns a hold's side of device pools: whether its resource is a
// pool (more than one device), its pool ticket and the wait for all its
// devices at once, the variables that show the payload its devices, the
// nodes its device-holder check watches (its own devices', not the pool's),
// the tenure bound that backfill relies on, what goes on record, and the
// device queues that metrics and `gpu-hold reap -r POOL` also cover.
package hold

import (
	"context"
	"fmt"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/device"
	"github.com/gpu-hold/gpu-hold/internal/record"
	"github.com/gpu-hold/gpu-hold/queue"
)

// poolHold is the pool side of one hold; nil pool: a single token.
type poolHold struct {
	pool  *device.Pool
	grant *queue.PoolGrant
	devs  []device.Dev
	info  poolRecord
}

// poolRecord is what the record says of the devices.
type poolRecord struct {
	Count    int          `json:"count"`
	Granted  []device.Dev `json:"granted"`
	Backfill bool         `json:"backfill,omitempty"`
	// Filter says how the pool's other devices were kept from the payload.
	Filter string `json:"filter,omitempty"`
}

// resolvePool finds the resource's pool (resources.json, else discovery)
// and checks --count against it.
func (h *holdRun) resolvePool() error {
	o := &h.o
	// devicePatterns has said what is wrong with resources.json, unless
	// --device kept it from reading it: one warning, not two.
	warn := func(string) {}
	if len(o.Devices) > 0 {
		warn = func(m string) { o.Log.Warn().Msg(m) }
	}
	res, err := device.LoadResourcesWarn(o.Dir, warn)
	if err != nil {
		return err
	}
	p := device.PoolOf(device.LookupResource(res, o.Resource), "/")
	n := max(o.Count, 1)
	if err := device.CheckCount(p, n); err != nil {
		return err
	}
	if p.Multi() {
		h.pool.pool = &p
		h.pool.info.Count = n
	}
	return nil
}

// bound is the longest a pool hold can keep its devices once granted:
// the max hold (counted from the grant for a pool hold), the teardown's
// bounds and the device check's wait, plus a margin for the record and the
// release. Without a max hold there is none (0), and nothing backfills
// before the head while this hold runs. A hold that keeps its token while
// a device is held (withhold.go) outlasts it: its devices' release bound
// is then past, which can only make the head's earliest start look sooner,
// so that fewer tickets backfill, never more. The whole pool grant is
// kept, its clean devices too: a pool grant gives its devices back only
// all at once.
func (h *holdRun) bound() time.Duration {
	o := &h.o
	if o.MaxHold <= 0 {
		return 0
	}
	b := o.MaxHold + o.Grace + o.SurvivorWait + 10*time.Second
	if o.DeviceHolders == device.PolicyWait || o.DeviceHolders == device.PolicyFail {
		b += o.DeviceWait
	}
	return b
}

// enqueue takes the ticket: the resource's token queue, or the pool's.
func (h *holdRun) enqueue(ctx context.Context, t queue.Ticket) (queue.Waiter, error) {
	o := &h.o
	warn := queue.DirOptions{Warn: func(msg string) { o.Log.Warn().Msg(msg) }}
	if h.pool.pool == nil {
		q, err := h.openQueue()
		if err != nil {
			return nil, err
		}
		return h.enqueueOn(ctx, q, t)
	}
	if o.Etcd != nil {
		return nil, fmt.Errorf("resource %s is a pool of this host's devices, which only the directory queue can hand out: drop --queue (or GPU_HOLD_QUEUE) for it, or name a resource without devices", o.Resource)
	}
	var names []string
	for _, d := range h.pool.pool.Devices {
		names = append(names, device.QueueName(o.Resource, d))
	}
	p, err := queue.OpenPool(o.Dir, o.Resource, names, !h.pool.pool.NoBackfill, warn)
	if err != nil {
		return nil, err
	}
	t.Count, t.Bound = h.pool.info.Count, h.bound()
	w, err := p.Enqueue(t)
	if err != nil {
		return nil, err
	}
	return &poolWaiter{w, h}, nil
}

// poolWaiter is a pool ticket as a queue.Waiter.
type poolWaiter struct {
	*queue.PoolWaiter
	h *holdRun
}

func (w *poolWaiter) Wait(ctx context.Context, progress func(queue.Position)) (queue.Grant, error) {
	g, err := w.PoolWaiter.Wait(ctx, progress)
	if err != nil {
		return nil, err
	}
	w.h.pool.grant = g
	return g, nil
}

// poolGranted notes the devices taken: the check then watches their
// nodes only (other holds' payloads use the rest), unless --device said.
func (h *holdRun) poolGranted() error {
	ph := &h.pool
	if ph.grant == nil {
		return nil
	}
	devs, err := ph.pool.Pick(ph.grant.Devices())
	if err != nil {
		return err
	}
	ph.devs, ph.info.Granted, ph.info.Backfill = devs, devs, ph.grant.Backfilled()
	if len(h.o.Devices) == 0 {
		h.devices = nil
		for _, d := range devs {
			h.devices = append(h.devices, d.Nodes...)
		}
	}
	var names []string
	for _, d := range devs {
		names = append(names, d.Name)
	}
	d := ph.grant.Decision()
	ev := h.o.Log.Info().Ints("devices", ph.grant.Devices()).Strs("names", names).Bool("backfill", ph.info.Backfill).Interface("along", d.Along).Time("decided", d.At)
	if d.Backfill {
		ev = ev.Uint64("head", d.Head).Time("head_start", d.HeadStart)
	}
	ev.Msg(fmt.Sprintf("%d of the %d devices of %s taken", len(devs), len(ph.pool.Devices), h.o.Resource))
	h.recordPool()
	return nil
}

func (h *holdRun) recordPool() {
	info := h.pool.info
	h.rec.update(func(hi *record.HoldInfo) { hi.Devices = info })
}

// poolEnv is what shows the payload its devices (none without a pool).
func (h *holdRun) poolEnv() []string {
	if h.pool.grant == nil {
		return nil
	}
	return device.Env(h.pool.devs)
}

// maxHoldLeft is the max hold still to run at the payload's start: a pool
// hold's counts from the grant, so that its bound (which backfill trusts)
// holds even when reaping a dead holder took a while.
func (h *holdRun) maxHoldLeft() time.Duration {
	if h.pool.grant == nil || h.granted.IsZero() {
		return h.o.MaxHold
	}
	return max(h.o.MaxHold-time.Since(h.granted), time.Millisecond)
}

// poolQueues are the device queues of resource res's pool in dir (none
// when it is not a pool): `gpu-hold reap -r gpu` reaps them too, since a
// pool hold's dead holders are on its devices' queues.
func poolQueues(dir, res string, log func(string)) []string {
	rs, err := device.LoadResourcesWarn(dir, log)
	if err != nil {
		return nil
	}
	p := device.PoolOf(device.LookupResource(rs, res), "/")
	if !p.Multi() {
		return nil
	}
	var out []string
	for _, d := range p.Devices {
		out = append(out, device.QueueName(res, d))
	}
	return out
}

// poolMetricNames are the series a pool hold's metrics also go to: one per
// device it held (its device queue's name), so a pool's metrics are per
// device as well as per pool.
func (h *holdRun) poolMetricNames() []string {
	var out []string
	for _, d := range h.pool.devs {
		out = append(out, device.QueueName(h.o.Resource, d))
	}
	return out
}
