// guard_kernel_test.go owns the test of `gpu-hold guard --deny-at-open`
// against the real binary and kernel: with the guard's device filter on
// the cgroup v2 root, opening the fake node (a major no driver has: an
// open the filter lets through fails with ENXIO, one it refuses with
// EPERM) is refused to an intruder and let through for the token holder's
// payload and an allow-listed user; when the guard is SIGKILLed the
// filter goes with it and every open is let through again (fail-open).
package test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/cprog"
	"github.com/gpu-hold/gpu-hold/internal/testenv"
)

// openResult runs the opener in read mode as cred (nil: root) and returns
// its result line ("ok PID", "err ERRNO PID").
func openResult(t *testing.T, opener, node, dir, name string, cred *syscall.Credential) string {
	t.Helper()
	out := filepath.Join(dir, name)
	c := exec.Command(opener, "read", node, out, "default")
	c.Env = append(os.Environ(), markEnv+"="+newMark(t))
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: cred}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	go c.Wait()
	waitFile(t, out, 10*time.Second)
	b, _ := os.ReadFile(out)
	return strings.TrimSpace(string(b))
}

func errnoOf(res string) string {
	if f := strings.Fields(res); len(f) == 3 && f[0] == "err" {
		return f[1]
	}
	return res
}

const (
	errEPERM = "1" // refused by the filter
	errENXIO = "6" // let through: the fake node has no driver
)

func TestGuardDenyAtOpen(t *testing.T) {
	testenv.NeedRoot(t, "a device filter on the cgroup root")
	if err := bpfUsable(); err != nil {
		testenv.NeedBPF(t, err)
	}
	e := newGuardEnv(t)
	// Everything in directories every user can reach: uidA runs the opener.
	open := openDir(t)
	e.node = fakeNode(t, open)
	if err := os.WriteFile(filepath.Join(e.qdir, "resources.json"), []byte(fmt.Sprintf(`{"fake": {"devices": [%q]}}`, e.node)), 0o644); err != nil {
		t.Fatal(err)
	}
	opener := cprog.DevOpen(t, open)
	if err := os.WriteFile(e.allow, []byte(fmt.Sprintf(`{"allow": [{"uid": %d}]}`, uidA)), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := errnoOf(openResult(t, opener, e.node, e.scratch, "pre", nil)); r != errENXIO {
		t.Fatalf("test shape: the fake node opens with %s before the guard, want errno %s", r, errENXIO)
	}
	g := e.startGuard(t, "--deny-at-open")
	deadline := time.Now().Add(slowed(10 * time.Second))
	for !strings.Contains(g.Stderr(), "device filter attached") {
		if time.Now().After(deadline) || zombie(g.Cmd.Process.Pid) {
			t.Fatalf("the guard did not attach its filter\nstderr:\n%s", g.Stderr())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The holder's payload opens the node at once: it descends from a
	// gpu-hold process, which the filter knows before any ticket.
	payloadOut := filepath.Join(e.scratch, "payload")
	h := rig{}.start(t, e.qdir, newMark(t), e.scratch, "-r", "fake", "-l", "holder", "-g", "1s", "--", "bash", "-c",
		fmt.Sprintf(`%q read %q %q default`, opener, e.node, payloadOut))
	if r := errnoOf(openResult(t, opener, e.node, e.scratch, "intruder", nil)); r != errEPERM {
		t.Errorf("an intruder's open under the filter: %s, want errno %s (EPERM)", r, errEPERM)
	}
	if r := errnoOf(openResult(t, opener, e.node, e.scratch, "allowed", userCred(uidA))); r != errENXIO {
		t.Errorf("an allow-listed uid's open under the filter: %s, want errno %s (let through)", r, errENXIO)
	}
	waitFile(t, payloadOut, 10*time.Second)
	b, _ := os.ReadFile(payloadOut)
	if r := errnoOf(strings.TrimSpace(string(b))); r != errENXIO {
		t.Errorf("the token holder's payload's open under the filter: %s, want errno %s (let through)\nguard:\n%s\nhold:\n%s", r, errENXIO, g.Stderr(), h.Stderr())
	}
	deadline = time.Now().Add(slowed(5 * time.Second))
	for !strings.Contains(g.Stderr(), "denied at open") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(g.Stderr(), "denied at open") {
		t.Errorf("the guard did not log the refused open\nstderr:\n%s", g.Stderr())
	}
	if a, _ := os.ReadFile(e.audit); !strings.Contains(string(a), `"action":"denied"`) {
		t.Errorf("the audit log has no denied open:\n%s", a)
	}
	// Fail-open: the filter goes with the guard, however it dies.
	g.Signal(syscall.SIGKILL)
	g.Wait(10 * time.Second)
	if r := errnoOf(openResult(t, opener, e.node, e.scratch, "after", nil)); r != errENXIO {
		t.Errorf("an open after the guard was SIGKILLed: %s, want errno %s (the filter detached: fail-open)", r, errENXIO)
	}
	h.Signal(syscall.SIGTERM)
	h.Wait(20 * time.Second)
}
