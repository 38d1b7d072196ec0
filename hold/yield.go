// yield.go owns a yielding hold's own side (--yield): the queue's signal
// that a ticket that does not yield queued, which ends the hold as any
// other end cause does (the same teardown and record), with cause yielded.
package hold

import (
	"github.com/gpu-hold/gpu-hold/queue"
	"github.com/gpu-hold/gpu-hold/record"
)

// contendedOf is the grant's contention signal for a yielding hold; nil
// (never fires) for a hold that does not yield.
func (h *holdRun) contendedOf(g queue.Grant) <-chan struct{} {
	if !h.o.Yield {
		return nil
	}
	c, ok := g.(queue.Contender)
	if !ok {
		h.o.Log.Warn().Msg("this queue backend cannot tell a yielding hold that a job queued: the hold does not yield; end it with a signal, or use the directory queue")
		return nil
	}
	return c.Contended()
}

// yieldedBeforeStart reports (and sets the result of) a ticket that does
// not yield having queued while this hold took the token: its payload is
// then never started.
func (h *holdRun) yieldedBeforeStart() bool {
	select {
	case <-h.contended:
		h.yielded("a ticket that does not yield queued as the token was taken; yielding before the payload started")
		return true
	default:
		return false
	}
}

// yielded sets the result of a yielding hold that gives way, and says so.
func (h *holdRun) yielded(msg string) {
	h.res.Code, h.res.Cause = ExitYielded, record.CauseYielded
	h.o.Log.Info().Msg(msg)
}
