// signals_test.go owns the escape routes about exit status and signals: E12
// (the payload's own status, passed through) and E13 (the hold itself gets
// TERM, INT or HUP while the payload runs).
package test

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// E12: exit status. The payload exits 7: the hold exits 7. The payload's
// own process is killed from outside by TERM (or KILL): the hold exits
// 128+signal.
//
// Catches: a hold that maps every failure to 1, reads a signalled status
// as exit code -1 or 0, or reports the teardown's result instead of the
// payload's.
func TestE12ExitStatus(t *testing.T) { forBackends(t, true, routeE12) }

func routeE12(t *testing.T, rg rig) {
	t.Run("exit-7", func(t *testing.T) {
		t.Parallel()
		mark := newMark(t)
		d, q := rg.dirs(t)
		r := rg.start(t, q, mark, d, holdArgs(sh("exit 7"), "-g", "1s")...).Wait(20 * time.Second)
		requireEnd(t, r, 7, false)
		requireNoneLeft(t, mark)
	})
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run("killed-by-"+unixSigName(sig), func(t *testing.T) {
			t.Parallel()
			mark := newMark(t)
			d, q := rg.dirs(t)
			payload := script(t, d, "root.sh", "put root $$\nexec sleep 300\n")
			h := rg.start(t, q, mark, d, holdArgs(payload, "-g", "1s")...)
			root := readPid(t, filepath.Join(d, "root"), 10*time.Second)
			waitComm(t, root, "sleep", 5*time.Second) // its exec is done
			if st := stat(t, root); st.PPID != h.Cmd.Process.Pid {
				t.Fatalf("test shape: %d is not the payload's own process (parent %d, hold %d)", root, st.PPID, h.Cmd.Process.Pid)
			}
			signalMarked(t, root, mark, sig)
			r := h.Wait(20 * time.Second)
			requireEnd(t, r, 128+int(sig), false)
			requireNoneLeft(t, mark)
		})
	}
}

// E13: the hold itself gets TERM, INT or HUP while the payload runs, with a
// TERM-ignoring grandchild.
//
// Catches: a hold that dies of the signal (Go's default for TERM/HUP, and
// INT) and leaves the tree and the token behind; a hold that exits with
// 128+S before its teardown is done (the grandchild is still alive); a
// hold that handles the signal but releases nothing.
func TestE13HoldSignalled(t *testing.T) { forBackends(t, true, routeE13) }

func routeE13(t *testing.T, rg rig) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
		t.Run(unixSigName(sig), func(t *testing.T) {
			t.Parallel()
			mark := newMark(t)
			d, q := rg.dirs(t)
			payload := script(t, d, "root.sh", `( (trap "" TERM; put gc $BASHPID; exec sleep 300) & wait ) &
await gc
wait
`)
			h := rg.start(t, q, mark, d, holdArgs(payload, "-g", "1s")...)
			readPid(t, filepath.Join(d, "gc"), 10*time.Second)
			h.Signal(sig)
			r := h.Wait(20 * time.Second)
			if !h.Cmd.ProcessState.Exited() {
				t.Errorf("gpu-hold was killed by the signal instead of ending the hold: %v\nstderr:\n%s", h.Cmd.ProcessState, r.Stderr)
			}
			requireEnd(t, r, 128+int(sig), false)
			requireNoneLeft(t, mark)
			requireReleased(t, rg, q)
		})
	}
}

func unixSigName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGTERM:
		return "TERM"
	case syscall.SIGINT:
		return "INT"
	case syscall.SIGHUP:
		return "HUP"
	case syscall.SIGKILL:
		return "KILL"
	}
	return sig.String()
}
