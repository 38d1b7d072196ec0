// lease.go owns a token held through a lease (the etcd queue): its fencing
// number in the record and the payload's environment, and its loss, which
// ends the hold (lease-lost, exit 76) with its own grace and is never
// followed by a quiet re-acquire.
package hold

import (
	"strconv"
	"time"

	"github.com/gpu-hold/gpu-hold/queue"
	"github.com/gpu-hold/gpu-hold/record"
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
