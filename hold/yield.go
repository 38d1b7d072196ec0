// yield.go owns a yielding hold's own side (--yield): where it can run (the
// directory queue, a single token or one device of a pool), and the
// queue's signal that a ticket that does not yield queued, which ends the
// hold as any other end cause does (the same teardown and record), with
// cause yielded.
package hold

import (
	"errors"
	"fmt"

	"github.com/gpu-hold/gpu-hold/internal/device"
	"github.com/gpu-hold/gpu-hold/internal/record"
	"github.com/gpu-hold/gpu-hold/queue"
)

// yieldUsable refuses --yield where no grant could tell the hold that a
// job queued: a keeper that never yields would keep the device from jobs.
func (h *holdRun) yieldUsable() error {
	o := &h.o
	switch {
	case !o.Yield:
		return nil
	case o.Etcd != nil:
		return errors.New("--yield works on the directory queue only: the etcd queue cannot tell a keeper that a job queued; run the keeper without --queue (GPU_HOLD_QUEUE)")
	case h.pool.pool != nil && len(h.pool.pool.Devices) > 0:
		return fmt.Errorf("--yield on pool %s: run the keeper on one of its devices (-r %s): a pool job that needs that device then ends it", o.Resource, device.QueueName(o.Resource, h.pool.pool.Devices[0]))
	}
	return nil
}

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
