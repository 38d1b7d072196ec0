// mark_test.go tests Kill and Live against processes caught in an execve.
package mark

import (
	"os"
	"os/exec"
	"testing"
	"time"
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
			Kill(m)
			<-done
			t.Fatalf("round %d: the process outlived Kill by 5 s", i)
		}
	}
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
