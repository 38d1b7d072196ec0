// mark_test.go tests Kill and Live against processes caught in an execve.
package mark

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/proc"
)

// A process killed just as it execs its next program (bash running its
// one command in place) is not missed, though its environment cannot be
// read whole while the exec is under way.
func TestKillCatchesExec(t *testing.T) {
	for i := range 100 {
		m, cmd := startExecer(t)
		Kill(m)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			if !killed(cmd.Process.Pid) {
				Kill(m)
				<-done
				t.Fatalf("round %d: the process outlived Kill by 5 s, and no SIGKILL reached it", i)
			}
			// Killed, and the kernel is slow to end it: on a loaded host an
			// exit can wait seconds for the task list's lock.
			select {
			case <-done:
			case <-time.After(time.Minute):
				t.Fatalf("round %d: the process, SIGKILLed, did not end within a minute", i)
			}
		}
	}
}

// killed reports whether pid has begun to exit or has a SIGKILL pending.
func killed(pid int) bool {
	if st, err := proc.ReadStat(pid); err != nil || st.Dead() || st.Exiting() {
		return true
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return true
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		if k != "SigPnd" && k != "ShdPnd" {
			continue
		}
		if mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64); err == nil && mask&(1<<(syscall.SIGKILL-1)) != 0 {
			return true
		}
	}
	return false
}

// A process that Live looks for just as it execs its next program is
// counted, not taken for gone.
func TestLiveCatchesExec(t *testing.T) {
	for i := range 100 {
		m, cmd := startExecer(t)
		n := len(Live(m))
		Kill(m)
		cmd.Wait()
		if n != 1 {
			t.Fatalf("round %d: Live found %d processes, want 1", i, n)
		}
	}
}

// startExecer starts, under a fresh marker, a bash that at once execs its
// one command in place.
func startExecer(t *testing.T) (string, *exec.Cmd) {
	t.Helper()
	m := New()
	cmd := exec.Command("bash", "-c", "sleep 300")
	cmd.Env = append(os.Environ(), Env+"="+m)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return m, cmd
}

// Every read of a starting bash's environment that is not empty shows
// its marker, the moments when bash has cut its strings at '=' included
// (about 1 read in 40 starts here hit one).
func TestCarriesWhileBashParses(t *testing.T) {
	buf := make([]byte, envBuf)
	for i := range 100 {
		m, cmd := startExecer(t)
		for deadline := time.Now().Add(30 * time.Millisecond); time.Now().Before(deadline); {
			if env := readEnv(cmd.Process.Pid, buf); len(env) > 0 && !carries(env, m) {
				Kill(m)
				cmd.Wait()
				t.Fatalf("round %d: an environment of %d bytes read without its marker: %q", i, len(env), env[max(0, len(env)-120):])
			}
		}
		Kill(m)
		cmd.Wait()
	}
}
