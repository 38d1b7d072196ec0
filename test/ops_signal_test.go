// ops_signal_test.go owns the second-signal route: a hold that got INT or
// TERM and is in its grace, signalled again, cuts the grace short and KILLs
// now, and still exits with the first signal's code, nothing left.
package test

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Catches: a second Ctrl-C that is only logged (the hold waits out its
// grace, an hour here); one that kills gpu-hold itself and leaves the
// TERM-ignoring grandchild and the token behind.
func TestSecondSignalCutsGrace(t *testing.T) { forBackends(t, true, routeSecondSignal) }

func routeSecondSignal(t *testing.T, rg rig) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(unixSigName(sig), func(t *testing.T) {
			t.Parallel()
			mark := newMark(t)
			d, q := rg.dirs(t)
			payload := script(t, d, "root.sh", `( (trap "" TERM; put gc $BASHPID; exec sleep 300) & wait ) &
await gc
wait
`)
			h := rg.start(t, q, mark, d, holdArgs(payload, "-g", "1h")...)
			readPid(t, filepath.Join(d, "gc"), 10*time.Second)
			h.Signal(sig)
			for deadline := time.Now().Add(20 * time.Second); !strings.Contains(h.Stderr(), `"TERM sent"`); time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("no TERM pass after the first %v:\n%s", sig, h.Stderr())
				}
			}
			h.Signal(sig)
			r := h.Wait(30 * time.Second) // the grace is an hour: only the cut ends it
			requireEnd(t, r, 128+int(sig), false)
			requireNoneLeft(t, mark)
			if !strings.Contains(r.Stderr, "grace cut short: KILL now") {
				t.Errorf("the log does not say the grace was cut short:\n%s", r.Stderr)
			}
		})
	}
}
