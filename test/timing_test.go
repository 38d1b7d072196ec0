// timing_test.go owns the one rule for time in these tests: a bound on how
// long a hold takes is scaled (bound) by how slow the host is now, and is
// measured from the hold's own event (sinceLogged), not from the start of
// its process, whose start-up a loaded host stretches the most.
package test

import (
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// hostScale is how much slower than a quiet host this one runs:
// $GPU_HOLD_TEST_SLOW (make test-kernels' guest) or the load average per
// CPU when this test process first asked, whichever is more, from 1 to
// maxScale. Read once, so that a route's grace and its bound, scaled
// together, keep their order.
var hostScale = sync.OnceValue(func() float64 {
	f := 1.0
	if v, err := strconv.Atoi(os.Getenv(slowEnv)); err == nil && v > 1 {
		f = float64(v)
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if fields := strings.Fields(string(b)); len(fields) > 0 {
			if l, err := strconv.ParseFloat(fields[0], 64); err == nil {
				f = max(f, math.Ceil(l/float64(runtime.NumCPU())))
			}
		}
	}
	return min(f, maxScale)
})

// maxScale caps the load's scale: past it, a bound no longer tells a hold
// that waits its full grace from one that does not.
const maxScale = 8

// bound is d scaled by hostScale: for an upper bound on a time a hold
// takes, and for the grace that bound must stay below.
func bound(d time.Duration) time.Duration {
	return time.Duration(float64(d) * hostScale())
}

// sinceLogged is the time from the hold's first log line whose message
// starts with msg to the hold's exit.
func sinceLogged(t *testing.T, r result, msg string) time.Duration {
	t.Helper()
	for _, l := range logLines(r.Stderr) {
		if !strings.HasPrefix(l.msg(), msg) {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, l.str("time"))
		if err != nil {
			t.Fatalf("log line %q has no time: %v", msg, err)
		}
		return r.End.Sub(at)
	}
	t.Fatalf("the hold never logged %q\nstderr:\n%s", msg, r.Stderr)
	return 0
}
