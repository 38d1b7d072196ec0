// ops_pty_test.go owns what a person sees at a terminal: gpu-hold run under
// a pty, waiting behind a holder (the one status line, redrawn in place)
// and then holding (the console log and the payload's own output); and
// under --log-format json on the same terminal, JSON lines only and no
// status line drawn.
package test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/gpu-hold/gpu-hold/queue"
)

// ptyRun is gpu-hold on a terminal: its output so far, and its end.
type ptyRun struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
}

func startPty(t *testing.T, mark string, args ...string) *ptyRun {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), markEnv+"="+mark, "TERM=xterm", "NO_COLOR=1")
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 160})
	if err != nil {
		t.Fatalf("starting gpu-hold on a pty: %v", err)
	}
	r := &ptyRun{cmd: cmd, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		buf := make([]byte, 4096)
		for {
			n, err := f.Read(buf)
			r.mu.Lock()
			r.out.Write(buf[:n])
			r.mu.Unlock()
			if err != nil { // EIO once the last writer closed the terminal
				return
			}
		}
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
		f.Close()
	})
	return r
}

func (r *ptyRun) screen() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out.String()
}

// waitFor waits, bounded, until the terminal has shown s.
func (r *ptyRun) waitFor(t *testing.T, s string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(r.screen(), s); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the terminal never showed %q:\n%q", s, r.screen())
		}
	}
}

func (r *ptyRun) wait(t *testing.T) int {
	t.Helper()
	err := r.cmd.Wait()
	select {
	case <-r.done:
	case <-time.After(5 * time.Second):
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return 0
}

func TestTerminalView(t *testing.T) {
	dir := t.TempDir()
	mark := newMark(t)
	a := newHold(t, dir, mark, "-l", "alpha", "--track", "proc", "--", "sleep", "300").Start()
	qWaitFor(t, dir, "gpu", "alpha holding", qHeldBy("alpha"))

	// Waiting: one status line, redrawn in place (\r, erase line).
	r := startPty(t, mark, "--dir", dir, "-l", "beta", "--track", "proc", "--", "sh", "-c", "echo payload says hello; sleep 1")
	qWaitFor(t, dir, "gpu", "beta waiting", func(st queue.Status) bool { return len(st.Waiters) == 1 })
	r.waitFor(t, "\r\x1b[Kwaiting: 0 ahead, held by alpha (pid ")
	waiting := r.screen()
	t.Logf("what a person sees while waiting:\n%s", printable(waiting))
	if !strings.Contains(waiting, "waiting for the token") || strings.Contains(waiting, `{"level"`) {
		t.Errorf("waiting: want the console log, not JSON:\n%s", printable(waiting))
	}

	// Holding: the line is cleared, the log says so, the payload speaks.
	a.Signal(syscall.SIGTERM)
	a.Wait(30 * time.Second)
	if code := r.wait(t); code != 0 {
		t.Errorf("beta exited %d\n%s", code, printable(r.screen()))
	}
	all := r.screen()
	held := all[len(waiting):]
	t.Logf("what a person sees once it holds:\n%s", printable(held))
	for _, want := range []string{"\r\x1b[K", "token taken", "payload started", "payload says hello", "hold ended", "token released"} {
		if !strings.Contains(held, want) {
			t.Errorf("after the wait, the terminal lacks %q:\n%s", want, printable(held))
		}
	}
	if i := strings.LastIndex(all, "\r\x1b[Kwaiting"); i > strings.Index(all, "token taken") {
		t.Errorf("the status line was drawn after the token was taken:\n%s", printable(all))
	}
}

func TestTerminalJSONDrawsNothing(t *testing.T) {
	dir := t.TempDir()
	mark := newMark(t)
	a := newHold(t, dir, mark, "-l", "alpha", "--track", "proc", "--", "sleep", "300").Start()
	qWaitFor(t, dir, "gpu", "alpha holding", qHeldBy("alpha"))
	r := startPty(t, mark, "--dir", dir, "--log-format", "json", "-l", "beta", "--track", "proc", "-w", "2s", "--", "true")
	code := r.wait(t)
	a.Signal(syscall.SIGTERM)
	a.Wait(30 * time.Second)
	out := r.screen()
	if code != 75 {
		t.Errorf("beta exited %d, want 75 (its -w ran out)", code)
	}
	if strings.Contains(out, "\x1b[") || strings.Contains(out, "\r\x1b") {
		t.Errorf("JSON mode drew on the terminal:\n%s", printable(out))
	}
	lines := strings.Split(strings.TrimSpace(strings.ReplaceAll(out, "\r\n", "\n")), "\n")
	for _, l := range lines {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) != nil {
			t.Errorf("a line that is not JSON: %q", l)
		}
	}
	if last := lines[len(lines)-1]; !strings.Contains(last, `"exit_code":75`) || !strings.Contains(last, "wait allowance of 2s ran out") {
		t.Errorf("the final error is not a JSON line with its code: %q", last)
	}
}

// printable shows control characters for a log.
func printable(s string) string {
	return strings.NewReplacer("\x1b", `\e`, "\r\n", "\n", "\r", `\r`).Replace(s)
}
