// authority_test.go checks As: a root process acting as another uid may
// signal that uid's processes and not root's, and the rest of the process
// keeps its own credentials.
package proc

import (
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/gpu-hold/gpu-hold/internal/testenv"
)

// authUID is an unprivileged uid with no passwd entry.
const authUID = 61001

// startAs starts a marked sleep as cred (nil: as the test) and returns it.
func startAs(t *testing.T, cred *syscall.Credential) Ident {
	t.Helper()
	cmd := exec.Command("sleep", "300")
	cmd.Env = append(os.Environ(), markEnv())
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	st, err := ReadStat(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Signal(st.Ident, syscall.SIGKILL); cmd.Wait() })
	return st.Ident
}

// Signal 0 asks the kernel for the authority without delivering anything
// (SIGCONT would pass within a session whatever the uids).
func TestAuthorityAs(t *testing.T) {
	testenv.NeedRoot(t, "taking on another uid's authority")
	user := startAs(t, &syscall.Credential{Uid: authUID, Gid: authUID})
	root := startAs(t, nil)
	a, err := As(authUID)
	if err != nil || a == nil {
		t.Fatalf("As(%d) = %v, %v; want a thread with that uid", authUID, a, err)
	}
	defer a.Close()
	signal := func(id Ident) error {
		h, err := Open(id)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		return a.Signal(h, syscall.Signal(0))
	}
	if err := signal(user); err != nil {
		t.Errorf("as uid %d, signalling its own process: %v", authUID, err)
	}
	if err := signal(root); !Denied(err) {
		t.Errorf("as uid %d, signalling a root process gave %v, want EPERM", authUID, err)
	}
	// The thread's credentials stayed on it: the process is still root.
	if os.Geteuid() != 0 {
		t.Fatalf("the process lost root: euid %d", os.Geteuid())
	}
	if err := Signal(root, syscall.Signal(0)); err != nil {
		t.Errorf("as the process (root), signalling a root process: %v", err)
	}
	for range 50 { // other goroutines, on other threads, are root too
		done := make(chan error)
		go func() { done <- Signal(root, syscall.Signal(0)) }()
		if err := <-done; err != nil {
			t.Fatalf("a goroutine lost root's authority: %v", err)
		}
	}
}

func TestAuthorityOwnAndRefused(t *testing.T) {
	a, err := As(os.Geteuid())
	if a != nil || err != nil {
		t.Errorf("As(own uid) = %v, %v; want nil, nil (own authority)", a, err)
	}
	if os.Geteuid() == 0 {
		return
	}
	if _, err := As(0); err == nil {
		t.Errorf("a non-root process took on root's authority")
	}
}

// TestAuthorityNeverTheMainThread: the process's own credentials, which
// /proc and kill(2) show, are its main thread's; an authority thread must
// never be that one, however often authorities come and go.
func TestAuthorityNeverTheMainThread(t *testing.T) {
	testenv.NeedRoot(t, "taking on another uid's authority")
	for range 200 {
		a, err := As(authUID)
		if err != nil {
			t.Fatal(err)
		}
		a.Do(func() error { return nil })
		a.Close()
	}
	if !OwnIDs(os.Getpid()) {
		t.Fatalf("the process's own ids changed: /proc/self/status shows another user's (an authority ran on the main thread)")
	}
}
