// lease.go owns a token held through a lease (the etcd queue): its fencing
// number in the record and the payload's environment, its loss, which
// ends the hold (lease-lost, exit 76) with its own grace and is never
// followed by a quiet re-acquire, and how long that grace may be.
package hold

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/record"
	"github.com/gpu-hold/gpu-hold/queue"
)

// fenced notes a grant whose token can be lost: its fence goes into the
// record (and, at start, the payload's environment).
func (h *holdRun) fenced(g queue.Grant) {
	f, ok := g.(queue.Fenced)
	if !ok {
		return
	}
	h.leased = f
	h.rec.update(func(hi *record.HoldInfo) {
		hi.Lease = &record.LeaseInfo{Queue: h.o.Etcd.String(), Fence: f.Fence(), TTLMS: h.o.Etcd.TTL.Milliseconds()}
	})
	h.o.Log.Info().Int64("fence", f.Fence()).Msg("token held through an etcd lease")
}

// fenceEnv is the payload's GPU_HOLD_FENCE, when there is a fence.
func (h *holdRun) fenceEnv() []string {
	if h.leased == nil {
		return nil
	}
	return []string{FenceEnv + "=" + strconv.FormatInt(h.leased.Fence(), 10)}
}

// lostC is the grant's loss (nil, never ready, for the directory).
func (h *holdRun) lostC() <-chan queue.LostInfo {
	if h.leased == nil {
		return nil
	}
	return h.leased.Lost()
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

// How long the payload may run once the lease is lost. The holder renews
// its lease every keep-alive interval (TTL/3) and keeps a deadline: the
// send time of the last keep-alive etcd acknowledged, plus the TTL, less
// one interval. etcd received that keep-alive after it was sent, so it
// expires the lease no sooner than one interval after the deadline; only
// then does it delete the ticket, and only then does a waiter on another
// host, watching it, read the queue, take the token and start its payload.
// So from its deadline the holder has one interval to end its payload:
// notice (a timer), TERM, --lost-grace, KILL, the exits. --lost-grace may
// take that interval less lostMargin, which is for the rest on a loaded
// machine (a late timer, a slow KILL) and for clocks that do not run
// quite alike.
const lostMargin = 500 * time.Millisecond

// maxLostGrace is the longest --lost-grace that ends the payload before
// another host can be granted the token of f.
func maxLostGrace(f *Fleet) time.Duration { return f.Interval - lostMargin }

// fitLostGrace checks --lost-grace against the lease. A grace given that
// does not fit is refused, saying what fits: the user asked for a grace
// the fleet cannot honour without two payloads at once. The default is
// shortened to fit, and the log says so: the user asked for nothing.
func (o *Options) fitLostGrace() error {
	if o.Etcd == nil || o.Etcd.Interval <= 0 {
		return nil
	}
	most := maxLostGrace(o.Etcd)
	if o.LostGrace <= most {
		return nil
	}
	if o.LostGraceGiven || most < 0 {
		ttl := math.Ceil(float64(o.LostGrace+lostMargin) * float64(o.Etcd.TTL) / float64(o.Etcd.Interval) / float64(time.Second))
		return fmt.Errorf("--lost-grace %v does not fit the etcd lease (ttl %v): a holder that lost its lease knows it one keep-alive interval (%v) before etcd can grant the token to another host, and its payload must be gone by then, with %v to spare: pass --lost-grace %v or less, or a ttl of at least %.0fs (?ttl=%.0f)",
			o.LostGrace, o.Etcd.TTL, o.Etcd.Interval, lostMargin, max(most, 0), ttl, ttl)
	}
	o.Log.Warn().Dur("lost_grace_ms", most).Dur("default_ms", o.LostGrace).Dur("ttl_ms", o.Etcd.TTL).
		Msg("--lost-grace shortened to fit the etcd lease: a payload must be gone one keep-alive interval (ttl/3) after its holder lost the lease, less a margin; pass a longer ttl for a longer grace")
	o.LostGrace = most
	return nil
}
