// fleet.go owns the queue backend's choice (the directory, or etcd when
// --queue names it), the host name a ticket carries, and a token held
// through a lease: its fencing number in the record and the payload's
// environment, and its loss, which ends the hold (lease-lost, exit 76)
// with its own grace, and is never followed by a quiet re-acquire.
package hold

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/rs/zerolog"

	"github.com/gpu-hold/gpu-hold/queue"
	"github.com/gpu-hold/gpu-hold/queue/etcdq"
	"github.com/gpu-hold/gpu-hold/record"
)

// HostEnv overrides the host name tickets carry (tests simulate hosts).
const HostEnv = "GPU_HOLD_HOSTNAME"

// FenceEnv carries the fencing token to the payload.
const FenceEnv = "GPU_HOLD_FENCE"

// TicketHost is the host name put in tickets: $GPU_HOLD_HOSTNAME, else
// the kernel's.
func TicketHost() string {
	if h := os.Getenv(HostEnv); h != "" {
		return h
	}
	h, _ := os.Hostname()
	return h
}

// openQueue opens the resource's queue: etcd when o.Etcd is set (the
// local resource dir is still made, for the records), else the directory.
func (h *holdRun) openQueue() (queue.Queue, error) {
	o, log := &h.o, h.o.Log
	warn := func(msg string) { log.Warn().Msg(msg) }
	dq, err := queue.OpenDir(o.Dir, o.Resource, queue.DirOptions{Warn: warn})
	if err != nil || o.Etcd == nil {
		return dq, err
	}
	if c, ok := dq.(interface{ Close() error }); ok {
		c.Close()
	}
	cfg := *o.Etcd
	cfg.Host = TicketHost()
	return etcdq.Open(cfg, o.Resource, warn)
}

// openReapQueue opens res's queue for a reap: etcd when o.Etcd is set.
func openReapQueue(o ReapOptions, res string) (queue.Queue, error) {
	if o.Etcd == nil {
		return queue.OpenDir(o.Dir, res, queue.DirOptions{Warn: func(msg string) { o.Log.Warn().Msg(msg) }})
	}
	cfg := *o.Etcd
	cfg.Host = TicketHost()
	return etcdq.Open(cfg, res, func(msg string) { o.Log.Warn().Msg(msg) })
}

// enqueueOn takes the ticket on q; etcd's first contact is bounded by -w
// too.
func (h *holdRun) enqueueOn(ctx context.Context, q queue.Queue, t queue.Ticket) (queue.Waiter, error) {
	eq, ok := q.(*etcdq.Queue)
	if !ok {
		return q.Enqueue(t)
	}
	if h.o.Wait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, h.o.Wait)
		defer cancel()
	}
	return eq.EnqueueCtx(ctx, t)
}

// enqueueFailed maps a failed Enqueue to the hold's error: etcd
// unreachable is the queue's failure (75); anything else gpu-hold's own.
func enqueueFailed(err error) error {
	if errors.Is(err, etcdq.ErrUnreachable) {
		return &Error{Code: ExitQueue, Err: fmt.Errorf("%v; nothing was queued", err)}
	}
	return &Error{Code: ExitUsage, Err: err}
}

// fenced notes a grant whose token can be lost: its fence goes into the
// record (and, at start, the payload's environment).
func (h *holdRun) fenced(g queue.Grant) {
	f, ok := g.(queue.Fenced)
	if !ok {
		return
	}
	h.fence = f
	h.rec.update(func(hi *record.HoldInfo) {
		hi.Lease = &record.LeaseInfo{Queue: h.o.Etcd.String(), Fence: f.Fence(), TTLMS: h.o.Etcd.TTL.Milliseconds()}
	})
	h.o.Log.Info().Int64("fence", f.Fence()).Msg("token held through an etcd lease")
}

// fenceEnv is the payload's GPU_HOLD_FENCE, when there is a fence.
func (h *holdRun) fenceEnv() []string {
	if h.fence == nil {
		return nil
	}
	return []string{FenceEnv + "=" + strconv.FormatInt(h.fence.Fence(), 10)}
}

// lostC is the grant's loss (nil, never ready, for the directory).
func (h *holdRun) lostC() <-chan queue.LostInfo {
	if h.fence == nil {
		return nil
	}
	return h.fence.Lost()
}

// lostNow reports (and sets the result of) a loss already known.
func (h *holdRun) lostNow() bool {
	if h.res.Cause == record.CauseLeaseLost {
		return true
	}
	select {
	case li := <-h.lostC():
		h.leaseLost(li)
		return true
	default:
		return false
	}
}

// leaseLost sets the result of a lost token and puts it on record.
func (h *holdRun) leaseLost(li queue.LostInfo) {
	h.res.Code, h.res.Cause = ExitLeaseLost, record.CauseLeaseLost
	h.rec.update(func(hi *record.HoldInfo) {
		if hi.Lease != nil {
			hi.Lease.Lost, hi.Lease.LostReason = li.At, li.Reason
		}
	})
	h.o.Log.Error().Time("lost_at", li.At).Str("reason", li.Reason).Dur("lost_grace_ms", h.o.LostGrace).
		Msg("the token's lease is lost: ending the payload now (it is not re-acquired)")
}

// grace is the teardown's grace: --lost-grace after a lost lease.
func (h *holdRun) grace() time.Duration {
	if h.res.Cause == record.CauseLeaseLost {
		return h.o.LostGrace
	}
	return h.o.Grace
}

// confirmDead checks, for a dead holder an etcd ticket names, what the
// directory gets from a ticket file's owner: that its uid is its own. The
// ticket's fields are anyone's claim (whoever may write the prefix), so
// its record must be a file of that uid, only its, naming the same hold
// and holder; otherwise nothing is ended on its word.
func (h *holdRun) confirmDead(d queue.Ticket) bool { return confirmDead(d, h.o.Log) }

func confirmDead(d queue.Ticket, log zerolog.Logger) bool {
	why := "its ticket names no record"
	if d.Record != "" {
		rec, err := record.ReadRecord(d.Record)
		switch {
		case err != nil:
			why = "its record cannot be read: " + err.Error()
		case untrustedRecord(rec.File, d.UID) != "":
			why = "its record " + untrustedRecord(rec.File, d.UID)
		case rec.Hold.ID != d.HoldID || rec.Hold.Holder != d.Holder:
			why = "its record is not its own (hold id or holder differ)"
		default:
			return true
		}
	}
	log.Error().Uint64("dead_ticket", d.Seq).Int("dead_uid", d.UID).Str("record", d.Record).
		Msgf("the etcd ticket of dead holder %s cannot be confirmed on this host (%s): ending nothing on its word and clearing it", d.Describe(), why)
	return false
}
