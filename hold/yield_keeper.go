// yield_keeper.go owns --restart, the serve keeper's loop: a yielding
// hold that gave way queues again at once (its ticket waits until no job
// waits and the token is free); one that ended otherwise (its server
// crashed, the max hold) queues again after a bounded backoff. A signal, a
// cancel, a failure of gpu-hold itself, or a payload that cannot be run
// ends the loop.
package hold

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/record"
)

// Backoff bounds of a keeper whose payload ended by itself.
const (
	keeperBackoffMin = time.Second
	keeperBackoffMax = time.Minute
)

// Keep runs the hold o describes; with o.Restart it runs it again after
// every end until one of the loop's stop conditions. It returns the last
// hold's result, or the signal's that ended the loop between two holds.
func Keep(ctx context.Context, o Options) (Result, error) {
	if !o.Restart {
		return Run(ctx, o)
	}
	// Signals between two holds end the loop; during a hold, Run gets
	// them too (every registered channel does) and ends the hold first.
	sigc := make(chan os.Signal, 4)
	signal.Notify(sigc, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigc)
	backoff := time.Duration(0)
	for round := 1; ; round++ {
		began := time.Now()
		res, err := Run(ctx, o)
		o.Resume = nil // a ticket is taken back once
		if stop, why := keeperStops(ctx, res, err, sigc); stop {
			o.Log.Info().Int("round", round).Str("why", why).Msg("keeper loop ends")
			return res, err
		}
		backoff = nextBackoff(backoff, res.Cause, time.Since(began))
		o.Log.Info().Int("round", round).Str("cause", string(res.Cause)).Dur("backoff_ms", backoff).Msg("keeper queues again")
		if s := sleepOrSignal(ctx, backoff, sigc); s != nil {
			sig := s.(syscall.Signal)
			o.Log.Info().Str("signal", sig.String()).Msg("keeper loop ends: signalled between holds")
			return Result{Code: ExitSignal(sig), Cause: record.CauseSignalled, Signal: sig}, nil
		}
		if ctx.Err() != nil {
			return res, err
		}
	}
}

// keeperStops says whether the loop ends after a hold, and why.
func keeperStops(ctx context.Context, res Result, err error, sigc chan os.Signal) (bool, string) {
	select {
	case <-sigc:
		return true, "signalled"
	default:
	}
	var he *Error
	switch {
	case ctx.Err() != nil:
		return true, "cancelled"
	case res.Cause == record.CauseSignalled:
		return true, "signalled"
	case res.Cause == record.CauseCancelled:
		return true, "cancelled (gpu-hold cancel)"
	case res.Cause == record.CauseExecFailed:
		return true, "the payload cannot be run"
	case err != nil && errors.As(err, &he) && he.Code == ExitQueue:
		return true, "the queue did not come round (--wait), or the ticket was removed"
	case err != nil:
		return true, "gpu-hold failed: " + err.Error()
	}
	return false, ""
}

// nextBackoff is the pause before the next round: none after a yield (the
// queue itself waits for the device to be free), else doubling from
// keeperBackoffMin up to keeperBackoffMax, and back to the minimum after
// a hold that lasted longer than the maximum.
func nextBackoff(prev time.Duration, cause record.Cause, lasted time.Duration) time.Duration {
	switch {
	case cause == record.CauseYielded:
		return 0
	case prev == 0 || lasted > keeperBackoffMax:
		return keeperBackoffMin
	}
	return min(2*prev, keeperBackoffMax)
}

// sleepOrSignal waits d, or less when a signal comes (returned) or ctx ends.
func sleepOrSignal(ctx context.Context, d time.Duration, sigc chan os.Signal) os.Signal {
	if d <= 0 {
		select {
		case s := <-sigc:
			return s
		default:
			return nil
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case s := <-sigc:
		return s
	case <-t.C:
	case <-ctx.Done():
	}
	return nil
}
