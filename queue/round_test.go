// round_test.go owns the test of Round: measured durations in messages are
// shown as a person would write them.
package queue

import (
	"testing"
	"time"
)

func TestRound(t *testing.T) {
	for _, c := range []struct{ in, want time.Duration }{
		{1000926287 * time.Nanosecond, time.Second}, // -w 1s, as measured
		{300412 * time.Microsecond, 300 * time.Millisecond},
		{1523 * time.Millisecond, 1500 * time.Millisecond},
		{90*time.Second + 400*time.Millisecond, 90 * time.Second},
		{1234567 * time.Nanosecond, time.Millisecond},
	} {
		if got := Round(c.in); got != c.want {
			t.Errorf("Round(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}
