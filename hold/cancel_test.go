// cancel_test.go owns the tests of CancelRunning against tickets that name
// what is not their owner's running gpu-hold: nothing is signalled.
package hold

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/testenv"
	"github.com/gpu-hold/gpu-hold/queue"
)

// startNamed starts a copy of sleep named name, as root, and returns it.
func startNamed(t *testing.T, name string) proc.Ident {
	t.Helper()
	b, err := os.ReadFile("/bin/sleep")
	if err != nil {
		t.Skipf("skipped because /bin/sleep cannot be read: %v", err)
	}
	path := filepath.Join(t.TempDir(), name)
	os.WriteFile(path, b, 0o755)
	c := exec.Command(path, "300")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		st, err := proc.ReadStat(c.Process.Pid)
		if err == nil && st.Comm == name {
			return st.Ident
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never ran", name)
		}
	}
}

func TestCancelRunningRefuses(t *testing.T) {
	testenv.NeedRoot(t, "a root process that another uid's forged ticket names")
	named := startNamed(t, "gpu-hold")
	other := startNamed(t, "sleepy")
	for _, c := range []struct {
		name   string
		t      queue.Ticket
		uid    int
		saying string
	}{
		{"no hold id (a reap's ticket)", queue.Ticket{Seq: 1, UID: 0, Holder: named}, 0, "is not a hold"},
		{"not the owner", queue.Ticket{Seq: 1, HoldID: "h", UID: 61001, Holder: named}, 61002, "only its owner or root"},
		{"not a gpu-hold", queue.Ticket{Seq: 1, HoldID: "h", UID: 0, Holder: other}, 0, "not a gpu-hold"},
		{"reused pid", queue.Ticket{Seq: 1, HoldID: "h", UID: 0, Holder: proc.Ident{PID: named.PID, Start: named.Start + 1}}, 0, "not running any more"},
		// root cancelling uid 61001's ticket acts with 61001's authority:
		// the kernel refuses to let it signal root's process.
		{"another uid's process", queue.Ticket{Seq: 1, HoldID: "h", UID: 61001, Holder: named}, 0, "cannot signal"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := CancelRunning(c.t, c.uid)
			if err == nil || !strings.Contains(err.Error(), c.saying) {
				t.Errorf("CancelRunning: %v, want an error saying %q", err, c.saying)
			}
			time.Sleep(50 * time.Millisecond) // a SIGUSR1 would have ended it by now
			for _, id := range []proc.Ident{named, other} {
				if !proc.Alive(id) {
					t.Fatalf("%v was signalled", id)
				}
			}
		})
	}
	// Opened before the cancel: once it is dead, Open refuses it.
	h, err := proc.Open(named)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := CancelRunning(queue.Ticket{Seq: 1, HoldID: "h", UID: 0, Holder: named}, 0); err != nil {
		t.Fatalf("the owner's own gpu-hold: %v", err)
	}
	if !h.WaitExit(10 * time.Second) {
		t.Error("SIGUSR1 did not reach the owner's gpu-hold")
	}
}
