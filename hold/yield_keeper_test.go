// yield_keeper_test.go owns the tests of --restart's backoff (none after
// a yield, doubling and bounded after any other end, reset after a long
// hold) and of a cancel ending the loop.
package hold

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/record"
)

func TestKeeperBackoff(t *testing.T) {
	for _, c := range []struct {
		prev   time.Duration
		cause  record.Cause
		lasted time.Duration
		want   time.Duration
	}{
		{0, record.CauseYielded, time.Second, 0},
		{8 * time.Second, record.CauseYielded, time.Second, 0},
		{0, record.CauseExited, time.Second, keeperBackoffMin},
		{2 * time.Second, record.CauseExited, time.Second, 4 * time.Second},
		{keeperBackoffMax, record.CauseSignal, time.Second, keeperBackoffMax},
		{keeperBackoffMax, record.CauseExited, 2 * keeperBackoffMax, keeperBackoffMin},
	} {
		if got := nextBackoff(c.prev, c.cause, c.lasted); got != c.want {
			t.Errorf("nextBackoff(%v, %s, %v) = %v, want %v", c.prev, c.cause, c.lasted, got, c.want)
		}
	}
}

// A keeper that gpu-hold cancel ended stops: queueing again would undo
// the cancel.
func TestKeeperStopsWhenCancelled(t *testing.T) {
	sigc := make(chan os.Signal, 1)
	if stop, why := keeperStops(context.Background(), Result{Code: ExitCancelled, Cause: record.CauseCancelled}, nil, sigc); !stop || !strings.Contains(why, "cancel") {
		t.Errorf("keeperStops(cancelled) = %v, %q; want it to stop, saying cancelled", stop, why)
	}
	if stop, _ := keeperStops(context.Background(), Result{Cause: record.CauseExited}, nil, sigc); stop {
		t.Error("a keeper whose payload exited stops; want it to queue again")
	}
}
