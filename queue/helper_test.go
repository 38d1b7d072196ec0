// helper_test.go owns the queue tests' helper processes: the test binary
// re-executed with GPU_HOLD_QUEUE_HELPER set plays one queue client (a
// holder to SIGKILL, a waiter, a reaper, a canceller), possibly as another
// uid, and talks to the test through its stdin and stdout.
package queue

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/testenv"
)

const helperEnv = "GPU_HOLD_QUEUE_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helperMain(mode))
	}
	code := m.Run()
	if sharedExePath != "" {
		os.RemoveAll(filepath.Dir(sharedExePath))
	}
	os.Exit(code)
}

// helperMain is one queue client. It reports on stdout, one line each:
// "ticket N", "granted N", "dead N HOLDID RECORD", "reaped N", "err TEXT",
// and waits for stdin to close before it releases and exits.
func helperMain(mode string) int {
	say := func(f string, a ...any) { fmt.Printf(f+"\n", a...) }
	q, err := OpenDir(os.Getenv("QH_DIR"), os.Getenv("QH_RES"), DirOptions{Warn: func(m string) { fmt.Fprintln(os.Stderr, "warn:", m) }})
	if err != nil {
		say("err %v", err)
		return 1
	}
	label := os.Getenv("QH_LABEL")
	switch mode {
	case "pool":
		return poolHelper(say, label)
	case "snipe":
		return snipeHelper(say, filepath.Join(os.Getenv("QH_DIR"), os.Getenv("QH_RES")))
	case "hidepid":
		return hidepidHelper(say)
	case "keep":
		return keepHelper(say, q, label)
	}
	switch mode {
	case "cancel":
		seq, _ := strconv.ParseUint(os.Getenv("QH_SEQ"), 10, 64)
		uid, _ := strconv.Atoi(os.Getenv("QH_UID"))
		if err := q.Cancel(seq, uid); err != nil {
			if errors.Is(err, ErrNotOwner) {
				say("notowner %v", err)
			} else {
				say("err %v", err)
			}
			return 0
		}
		say("ok")
		return 0
	case "hold", "reap", "enqueue":
		w, err := q.Enqueue(Ticket{Label: label, HoldID: "hold-" + label, Record: "/records/" + label})
		if err != nil {
			say("err %v", err)
			return 1
		}
		say("ticket %d", w.Ticket().Seq)
		if mode == "enqueue" {
			io.Copy(io.Discard, os.Stdin)
			w.Cancel()
			return 0
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		g, err := w.Wait(ctx, nil)
		if err != nil {
			say("err %v", err)
			return 1
		}
		say("granted %d", g.Ticket().Seq)
		for _, d := range g.Dead() {
			say("dead %d %s %s", d.Seq, d.HoldID, d.Record)
		}
		if mode == "reap" {
			for _, d := range g.Dead() {
				if err := g.Reaped(d); err != nil {
					say("err %v", err)
					return 1
				}
				say("reaped %d", d.Seq)
			}
		}
		io.Copy(io.Discard, os.Stdin)
		if err := g.Release(); err != nil {
			say("err %v", err)
			return 1
		}
		return 0
	}
	say("err unknown helper mode %q", mode)
	return 2
}

// helper is a running helper process.
type helper struct {
	t     *testing.T
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string
}

// helperOpts: who the helper runs as, and with what.
type helperOpts struct {
	uid   int // 0: as the test
	label string
	env   []string
}

var testMark = func() string {
	var b [8]byte
	rand.Read(b[:])
	return "gpuholdtest-" + hex.EncodeToString(b[:])
}()

// startHelper starts the test binary as a helper in mode.
func startHelper(t *testing.T, mode, dir, res string, o helperOpts) *helper {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if o.uid != 0 {
		exe = sharedExe(t)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, "QH_DIR="+dir, "QH_RES="+res, "QH_LABEL="+o.label,
		"GPU_HOLD_TEST_MARK="+testMark)
	cmd.Env = append(cmd.Env, o.env...)
	cmd.Stderr = os.Stderr
	if o.uid != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(o.uid), Gid: uint32(o.uid)}}
		cmd.Dir = "/"
	}
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting helper: %v", err)
	}
	h := &helper{t: t, cmd: cmd, in: in, lines: make(chan string, 64)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			h.lines <- sc.Text()
		}
		close(h.lines)
	}()
	t.Cleanup(func() {
		if h.cmd.ProcessState == nil {
			h.cmd.Process.Kill() // our own unreaped child: its pid cannot be reused
			h.cmd.Wait()
		}
	})
	return h
}

// expect reads the helper's next line and checks its first word.
func (h *helper) expect(word string) []string {
	h.t.Helper()
	select {
	case l, ok := <-h.lines:
		if !ok {
			h.t.Fatalf("helper exited; wanted %q", word)
		}
		f := strings.Fields(l)
		if len(f) == 0 || f[0] != word {
			h.t.Fatalf("helper said %q; wanted %q", l, word)
		}
		return f
	case <-time.After(20 * time.Second):
		h.t.Fatalf("helper did not say %q within 20s", word)
	}
	return nil
}

func (h *helper) seq(word string) uint64 {
	h.t.Helper()
	f := h.expect(word)
	if len(f) < 2 {
		h.t.Fatalf("helper said %v", f)
	}
	n, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		h.t.Fatal(err)
	}
	return n
}

// kill SIGKILLs the helper (our child, not yet reaped) and reaps it.
func (h *helper) kill() {
	h.cmd.Process.Kill()
	h.cmd.Wait()
}

// finish closes its stdin (it releases) and waits for a clean exit.
func (h *helper) finish() {
	h.t.Helper()
	h.in.Close()
	done := make(chan error, 1)
	go func() { done <- h.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			h.t.Fatalf("helper: %v", err)
		}
	case <-time.After(20 * time.Second):
		h.t.Fatalf("helper did not exit")
	}
}

var sharedExePath string

// sharedExe copies the test binary where another uid can run it.
func sharedExe(t *testing.T) string {
	t.Helper()
	if sharedExePath != "" {
		return sharedExePath
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	d, err := os.MkdirTemp("", "gpu-hold-queue-exe-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(d, 0o755)
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(d, "queue.test")
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	sharedExePath = p
	return p
}

// sharedDir makes a fleet-style directory: world-writable and sticky, so
// helpers of other uids can use it.
func sharedDir(t *testing.T) string {
	t.Helper()
	testenv.NeedRoot(t, "running queue helpers as other users")
	d, err := os.MkdirTemp("", "gpu-hold-queue-shared-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := unix.Chmod(d, 0o1777); err != nil {
		t.Fatal(err)
	}
	return d
}
