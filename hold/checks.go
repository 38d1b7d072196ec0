// checks.go owns the hold's side of the device-holder check (baseline beside
// the payload's start, scan after teardown, warn/wait/fail), of the memory
// floor and of the metrics. The checks themselves are packages device,
// memfloor and metrics.
package hold

import (
	"context"
	"time"

	"github.com/gpu-hold/gpu-hold/device"
	"github.com/gpu-hold/gpu-hold/memfloor"
	"github.com/gpu-hold/gpu-hold/metrics"
	"github.com/gpu-hold/gpu-hold/proc"
	"github.com/gpu-hold/gpu-hold/record"
)

// devicePatterns resolves the device nodes this hold checks: --device, else
// the resource's configured list.
func devicePatterns(o *Options) ([]string, error) {
	if len(o.Devices) > 0 {
		return device.CheckFlags(o.Devices)
	}
	res, err := device.LoadResourcesWarn(o.Dir, func(m string) { o.Log.Warn().Msg(m) })
	if err != nil {
		return nil, err
	}
	return device.Patterns(device.LookupResource(res, o.Resource), nil), nil
}

// baselineScan is the scan of the device holders present before the
// payload (system daemons, monitoring agents are not blamed on it), made
// while the payload starts: on a busy host it is the longest step between
// two jobs, and nothing needs it before the teardown.
type baselineScan struct {
	done chan struct{}
	hs   []device.Holder
}

// deviceBaseline starts the baseline scan.
func (h *holdRun) deviceBaseline() *baselineScan {
	b := &baselineScan{done: make(chan struct{})}
	if len(h.devices) == 0 {
		close(b.done)
		return b
	}
	go func() {
		defer close(b.done)
		hs, err := device.ScanHolders(h.devices)
		if err != nil {
			h.o.Log.Warn().Err(err).Msg("cannot scan device holders before the payload; all holders found later are reported")
		}
		b.hs = hs
	}()
	return b
}

// before waits for the scan and keeps the holders that started before
// root: a process of the payload's that the scan saw beside the start is
// never taken for one that was there first.
func (b *baselineScan) before(root proc.Ident) device.Baseline {
	<-b.done
	var first []device.Holder
	for _, hs := range b.hs {
		if hs.Start < root.Start {
			first = append(first, hs)
		}
	}
	return device.NewBaseline(first)
}

// checkDevices reports every process outside the baseline that still holds
// the device after teardown, before the token is released.
func (h *holdRun) checkDevices(ctx context.Context, scan *baselineScan, root proc.Ident) {
	if len(h.devices) == 0 {
		return
	}
	baseline := scan.before(root)
	o, log := &h.o, h.o.Log
	// Only --device-holders=wait waits for them to go; warn and fail look once.
	bound := time.Duration(0)
	if o.DeviceHolders == device.PolicyWait {
		bound = o.DeviceWait
	}
	check, err := device.CheckHolders(ctx, o.DeviceHolders, h.devices, baseline, bound)
	if err != nil {
		log.Warn().Err(err).Msg("device-holder check incomplete")
	}
	hs := check.Holders
	h.deviceHolders = len(hs)
	if len(hs) == 0 {
		return
	}
	recs := make([]any, 0, len(hs))
	for _, dh := range hs {
		recs = append(recs, dh)
		log.Error().Int("pid", dh.PID).Uint64("start", dh.Start).Int("uid", dh.UID).Str("user", dh.User).
			Str("command", dh.Command).Str("node", dh.Node).Interface("drm", dh.DRM).
			Msg("device still held after teardown by a process outside the lineage")
	}
	h.rec.update(func(hi *record.HoldInfo) { hi.DeviceHolders = recs })
	if check.Failed() {
		h.res.Code, h.res.Cause = ExitDeviceHolders, record.CauseDeviceHolders
		log.Error().Int("holders", len(hs)).Msg("--device-holders=fail: exiting 73")
	}
}

// watchMemory returns a channel that delivers when available memory falls
// below --mem-floor (nil: no floor).
func (h *holdRun) watchMemory(ctx context.Context) <-chan memfloor.Low {
	ch, err := memfloor.Watch(ctx, h.o.MemFloor, h.memSource)
	if err != nil {
		h.o.Log.Warn().Err(err).Msg("memory floor not watched")
	}
	return ch
}

// writeMetrics adds this hold to the resource's metrics (--metrics-dir).
func (h *holdRun) writeMetrics(granted, ended time.Time) {
	if h.o.MetricsDir == "" {
		return
	}
	m := metrics.Hold{
		Granted: !granted.IsZero(), Cause: string(h.res.Cause), Survivors: len(h.res.Teardown.Survivors),
		DeviceHolders: h.deviceHolders, LostEvents: h.lost, End: ended,
	}
	if !granted.IsZero() {
		m.Wait, m.Hold = granted.Sub(h.queued), ended.Sub(granted)
	} else if !h.queued.IsZero() {
		m.Wait = ended.Sub(h.queued)
	}
	for _, res := range append([]string{h.o.Resource}, h.poolMetricNames()...) {
		if err := metrics.Record(h.o.MetricsDir, res, m); err != nil {
			h.o.Log.Warn().Err(err).Str("metrics_dir", h.o.MetricsDir).Msg("cannot write metrics")
		}
	}
}
