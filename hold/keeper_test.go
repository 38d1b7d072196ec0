// keeper_test.go owns the test of --restart's backoff: none after a
// yield, doubling and bounded after any other end, reset after a long hold.
package hold

import (
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/record"
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
