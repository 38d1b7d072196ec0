// ops_metrics_test.go owns the live gauges of --metrics-dir against the
// real binary: held with the queue's length while a hold holds, free once
// it has released.
package test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/queue"
)

func TestLiveMetrics(t *testing.T) {
	dir, mdir := t.TempDir(), t.TempDir()
	mark := newMark(t)
	live := filepath.Join(mdir, "gpu_hold_gpu.live.prom")
	a := newHold(t, dir, mark, "-l", "alpha", "--track", "proc", "--metrics-dir", mdir, "--", "sleep", "300").Start()
	qWaitFor(t, dir, "gpu", "alpha holding", qHeldBy("alpha"))
	b := newHold(t, dir, mark, "-l", "beta", "--track", "proc", "--", "true").Start()
	qWaitFor(t, dir, "gpu", "beta waiting", func(st queue.Status) bool { return len(st.Waiters) == 1 })
	// The holder refreshes on its tick: the waiter shows within a bound.
	waitProm(t, live, []string{`gpu_hold_token_held{resource="gpu"} 1`, `gpu_hold_queue_length{resource="gpu"} 1`}, 20*time.Second)
	a.Signal(syscall.SIGTERM)
	a.Wait(30 * time.Second)
	b.Wait(30 * time.Second)
	// beta had no --metrics-dir: alpha's last word is the token free.
	waitProm(t, live, []string{`gpu_hold_token_held{resource="gpu"} 0`, `gpu_hold_holder_since_timestamp_seconds{resource="gpu"} 0`}, time.Second)
}

// waitProm waits until the metrics file has every line of want.
func waitProm(t *testing.T, path string, want []string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		data, _ := os.ReadFile(path)
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(string(data), w+"\n")
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never had %q:\n%s", path, want, data)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
