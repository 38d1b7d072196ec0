// escapes_pid_test.go owns E11 of ESCAPES.md: a lineage member dies, its
// pid is given to an unrelated process, and the teardown must not signal it.
package test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/testenv"
)

const nsLastPid = "/proc/sys/kernel/ns_last_pid"

// E11: pid reuse. A member (`sleep 1.5`, long enough for any tracker to have
// recorded it) exits and is reaped; the test then starts an unrelated
// `sleep 300`, carrying another marker, on the very same pid (by writing
// pid-1 to ns_last_pid). The max hold then ends the hold.
//
// Catches: a teardown that signals a recorded bare pid without checking
// its start time (kill(pid) on every member ever seen): the unrelated
// process would die of the TERM. Not parallel: other tests' forks would
// steal the pid.
func TestE11PidReuse(t *testing.T) { forBackends(t, false, routeE11) }

func routeE11(t *testing.T, rg rig) {
	testenv.NeedRoot(t, "E11 (writing "+nsLastPid+")")
	// Another process may take the freed pid first (other packages' tests
	// fork meanwhile): a lost race starts the attempt over.
	const attempts = 5
	for try := 1; try <= attempts; try++ {
		if attemptE11(t, rg) {
			return
		}
		t.Logf("attempt %d: another process took the dead member's pid first; starting over", try)
	}
	testenv.Need(t, "in %d attempts another process always took the dead member's pid first: this host forks too much to stage a pid reuse", attempts)
}

// attemptE11 runs the route once; false when the pid could not be taken.
func attemptE11(t *testing.T, rg rig) bool {
	mark, other := newMark(t), newMark(t)
	d, q := rg.dirs(t)
	payload := script(t, d, "root.sh", `sleep 1.5 &
put member $!
wait $!
put reaped $$
exec sleep 300
`)
	h := rg.start(t, q, mark, d, holdArgs(payload, "-t", "4s", "-g", "1s")...)
	m := readPid(t, filepath.Join(d, "member"), 10*time.Second)
	waitFile(t, filepath.Join(d, "reaped"), 10*time.Second)
	u := takePid(t, m, other)
	if u == nil {
		h.Cmd.Process.Signal(syscall.SIGTERM) // end this attempt's hold early
		h.Wait(20 * time.Second)
		requireNoneLeft(t, mark)
		return false
	}
	ust := stat(t, u.Process.Pid)

	r := h.Wait(20 * time.Second)
	requireEnd(t, r, 124, false)
	requireNoneLeft(t, mark)
	st, err := proc.ReadStat(m)
	if err != nil || st.Start != ust.Start || st.Dead() {
		t.Errorf("the unrelated process on the dead member's pid %d was signalled by the teardown (now %+v, %v)", m, st, err)
	}
	return true
}

// takePid starts `sleep 300` marked with mark on exactly pid, which must be
// free; nil when another process got the pid first.
func takePid(t *testing.T, pid int, mark string) *exec.Cmd {
	t.Helper()
	for try := 0; try < 50; try++ {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
			return nil // taken by another process before the test could take it
		}
		cmd := exec.Command("sleep", "300")
		cmd.Env = append(os.Environ(), markEnv+"="+mark)
		if err := os.WriteFile(nsLastPid, []byte(strconv.Itoa(pid-1)), 0); err != nil {
			testenv.Need(t, "cannot write %s: %v", nsLastPid, err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		if cmd.Process.Pid == pid {
			return cmd
		}
		cmd.Process.Kill()
		cmd.Wait()
	}
	return nil
}
