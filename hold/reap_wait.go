// reap_wait.go owns a successor's reaping of the dead holders its grant
// names, and its wait for one it may not end: it neither starts its payload
// nor marks that holder reaped; it says once whose lineage runs and who can
// end it, and waits, bounded by -w, until root has ended it or nothing of
// it is left that this hold would have to end.
package hold

import (
	"context"
	"fmt"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/record"
	"github.com/gpu-hold/gpu-hold/queue"
)

// reapRetry is how often a blocked successor looks again: whether root
// reaped the dead holder, or what blocked it is gone.
const reapRetry = time.Second

// reapDead ends the lineage of every dead holder the grant names and tells
// the queue each was reaped. It returns a *blockedError when ctx ends while
// one it may not end is still there.
func (h *holdRun) reapDead(ctx context.Context, g queue.Grant) error {
	blocked := map[uint64]record.ReapedHold{}
	for _, d := range g.Dead() {
		if err := h.reapAndMark(g, d, blocked); err != nil {
			return err
		}
	}
	for len(blocked) > 0 {
		select {
		case <-ctx.Done():
			return h.giveUp(ctx, blocked)
		case <-time.After(reapRetry):
		}
		pending, err := g.Unreaped()
		if err != nil {
			return failf(ExitUsage, "cannot read the queue again while waiting for a dead holder to be ended: %v", err)
		}
		if err := h.retryBlocked(g, pending, blocked); err != nil {
			return err
		}
	}
	return nil
}

// retryBlocked drops the blocked holders someone entitled reaped, and
// reaps again those whose block is gone.
func (h *holdRun) retryBlocked(g queue.Grant, pending []queue.Ticket, blocked map[uint64]record.ReapedHold) error {
	still := map[uint64]bool{}
	for _, d := range pending {
		still[d.Seq] = true
	}
	for seq, rh := range blocked {
		if !still[seq] {
			h.o.Log.Info().Uint64("dead_ticket", seq).Msg("the dead holder's lineage was ended by a reaper entitled to it; going on")
			h.rec.reaped(rh)
			delete(blocked, seq)
		}
	}
	for _, d := range pending {
		if rh, ok := blocked[d.Seq]; ok && unblocked(d, rh) {
			delete(blocked, d.Seq)
			if err := h.reapAndMark(g, d, blocked); err != nil {
				return err
			}
		}
	}
	return nil
}

// reapAndMark reaps d; done, it is marked reaped; blocked, it is noted in
// blocked and said once.
func (h *holdRun) reapAndMark(g queue.Grant, d queue.Ticket, blocked map[uint64]record.ReapedHold) error {
	if h.leased != nil && !h.confirmDead(d) {
		return g.Reaped(d)
	}
	rh := reapOne(d, "hold", h.id, h.o.Grace, h.o.SurvivorWait, h.o.Log)
	if rh.Blocked != "" {
		blocked[d.Seq] = rh
		h.o.Log.Error().Uint64("dead_ticket", d.Seq).Int("dead_uid", d.UID).Msg(h.blockedMessage(d, rh))
		return nil
	}
	h.rec.reaped(rh)
	if err := g.Reaped(d); err != nil {
		return failf(ExitUsage, "ended dead holder %s but cannot clear it from the queue: %v", d.Describe(), err)
	}
	return nil
}

// unblocked reports whether what blocked rh is gone: the denied members
// died, or (a foreign lineage) its user runs nothing any more.
func unblocked(d queue.Ticket, rh record.ReapedHold) bool {
	if len(rh.Denied) == 0 {
		return !proc.UserRuns(d.UID)
	}
	for _, id := range rh.Denied {
		if proc.Alive(id) {
			return false
		}
	}
	return true
}

func (h *holdRun) blockedMessage(d queue.Ticket, rh record.ReapedHold) string {
	return fmt.Sprintf("dead holder %s may still have processes running, and this hold (uid %d) cannot end them (%s): not starting the payload and not marking it reaped; root can end it with `gpu-hold --dir %s reap -r %s` (the gpu-hold-reap timer does this); waiting for that",
		d.Describe(), h.ticket.UID, rh.Blocked, h.o.Dir, h.o.Resource)
}

// giveUp records the blocked reaps and returns the error that ends the hold.
func (h *holdRun) giveUp(ctx context.Context, blocked map[uint64]record.ReapedHold) error {
	for _, rh := range blocked {
		h.rec.reaped(rh)
	}
	return &blockedError{n: len(blocked), err: ctx.Err()}
}

// blockedError: the wait ended (-w, or a signal) while dead holders this
// hold may not end were still there.
type blockedError struct {
	n   int
	err error
}

func (e *blockedError) Error() string {
	return fmt.Sprintf("%d dead holder(s) that this hold may not end were still there when the wait ended (%v)", e.n, e.err)
}

func (e *blockedError) Unwrap() error { return e.err }
