// Package test runs the real gpu-hold binary against the escape routes of
// ESCAPES.md, the queue, and bad input. harness_test.go owns what every test
// shares: building the binary once, running holds in private queue
// directories, and marking every process a test starts so that the test only
// ever looks at, and signals, its own processes.
//
// The binaries (gpu-hold, gpu-hold-fleet beside it, built with -tags etcd,
// and gpu-hold-lobby) are built with `go build` into a temporary directory, unless
// GPU_HOLD_TEST_BIN names a gpu-hold binary built beforehand: then that one
// is run and no Go toolchain is needed (.ci/test-kernels runs this package's
// compiled tests in a qemu guest that has none). The binary must be one
// built from this tree, with gpu-hold-fleet beside it for the etcd tests
// and gpu-hold-lobby for the waiting holds, and its directory must be searchable by every user: the multi-user tests
// run it as other uids. The tests always run gpu-hold: an etcd queue goes
// through its exec into gpu-hold-fleet, as in production.
package test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/etcdtest"
	marks "github.com/gpu-hold/gpu-hold/internal/mark"
	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/testenv"
	"github.com/gpu-hold/gpu-hold/internal/teststock"
)

// markEnv is the environment variable that carries a test's marker. Every
// payload inherits it, and so does every process the payload creates.
const markEnv = marks.Env

var bin string // path of the gpu-hold binary built for this run

// binEnv names a prebuilt gpu-hold binary to test instead of building one.
const binEnv = "GPU_HOLD_TEST_BIN"

func TestMain(m *testing.M) {
	// The holds these tests run pin their spares, iterators and device
	// watch in a root of this process's own, not the host's.
	removeRoot := teststock.PrivateRoot()
	code := testMain(m)
	removeRoot()
	os.Exit(code)
}

func testMain(m *testing.M) int {
	if prebuilt := os.Getenv(binEnv); prebuilt != "" {
		abs, err := filepath.Abs(prebuilt)
		if err == nil {
			var st os.FileInfo
			if st, err = os.Stat(abs); err == nil && (!st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0) {
				err = errors.New("not an executable file")
			}
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s=%s: %v: build one with `go build -o FILE ./cmd/gpu-hold`, or unset %s to have the tests build it\n", binEnv, prebuilt, err, binEnv)
			return 1
		}
		bin = abs
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "gpu-hold-test-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// Every user may run it: the multi-user tests run holds as test uids.
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	bin = filepath.Join(dir, "gpu-hold")
	for _, b := range [][]string{{"-o", bin, "../cmd/gpu-hold"}, {"-tags", "etcd", "-o", filepath.Join(dir, "gpu-hold-fleet"), "../cmd/gpu-hold"}, {"-o", filepath.Join(dir, "gpu-hold-lobby"), "../cmd/gpu-hold-lobby"}} {
		build := exec.Command("go", append([]string{"build"}, b...)...)
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building", b[len(b)-2]+":", err)
			return 1
		}
	}
	code := m.Run()
	etcdtest.Cleanup()
	os.RemoveAll(dir)
	return code
}

// newMark returns a marker unique to this test and registers a cleanup that
// kills whatever still carries it (and only that).
func newMark(t *testing.T) string {
	t.Helper()
	mark := marks.New()
	t.Cleanup(func() { killMarked(mark) })
	return mark
}

// result is what a finished hold returned.
type result struct {
	Code    int
	Stdout  string
	Stderr  string
	Elapsed time.Duration
	End     time.Time // when the test saw it exit
}

// hold describes one gpu-hold invocation.
type hold struct {
	t    *testing.T
	Dir  string   // queue dir (--dir)
	Mark string   // marker put in the payload's environment
	Args []string // flags and payload, as after `gpu-hold`
	Env  []string // extra environment
	Cmd  *exec.Cmd
	out  bytes.Buffer
	err  syncBuffer // read while the hold runs (Stderr)
	t0   time.Time
}

// newHold prepares a hold in dir (a fresh t.TempDir() when empty).
func newHold(t *testing.T, dir, mark string, args ...string) *hold {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	return &hold{t: t, Dir: dir, Mark: mark, Args: args}
}

// Start starts the hold in the background.
func (h *hold) Start() *hold {
	h.t.Helper()
	args := append([]string{"--dir", h.Dir, "--log-format", "json"}, h.Args...)
	h.Cmd = exec.Command(bin, args...)
	h.Cmd.Env = append(append(append(os.Environ(), markEnv+"="+h.Mark), queueEnv(h.Dir)...), h.Env...)
	h.Cmd.Stdout, h.Cmd.Stderr = &h.out, &h.err
	// Its own process group, so a test can signal the hold alone.
	h.Cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A process left holding the output pipes must not keep Wait from
	// returning once the hold itself exited.
	h.Cmd.WaitDelay = time.Second
	h.t0 = time.Now()
	if err := h.Cmd.Start(); err != nil {
		h.t.Fatalf("starting gpu-hold: %v", err)
	}
	h.t.Cleanup(func() {
		if h.Cmd.ProcessState == nil {
			h.Cmd.Process.Kill()
			h.Cmd.Wait()
		}
	})
	return h
}

// Wait waits for the hold to exit, failing the test after limit (scaled
// by bound).
func (h *hold) Wait(limit time.Duration) result {
	h.t.Helper()
	limit = bound(limit)
	done := make(chan error, 1)
	go func() { done <- h.Cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(limit):
		h.Cmd.Process.Kill()
		<-done
		h.t.Fatalf("gpu-hold %v did not return within %v\nstderr:\n%s", h.Args, limit, h.err.String())
	}
	r := result{Code: h.Cmd.ProcessState.ExitCode(), Stdout: h.out.String(), Stderr: h.err.String(), Elapsed: time.Since(h.t0), End: time.Now()}
	if ws, ok := h.Cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		r.Code = 128 + int(ws.Signal())
	}
	return r
}

// Run starts the hold and waits for it.
func (h *hold) Run(limit time.Duration) result {
	h.t.Helper()
	return h.Start().Wait(limit)
}

// Signal sends sig to the hold process itself (our own child: its pid is
// ours until we reap it).
func (h *hold) Signal(sig syscall.Signal) {
	h.t.Helper()
	if err := h.Cmd.Process.Signal(sig); err != nil {
		h.t.Fatalf("signalling gpu-hold: %v", err)
	}
}

// Stderr returns what the hold wrote to stderr so far.
func (h *hold) Stderr() string { return h.err.String() }

// syncBuffer is a bytes.Buffer that may be read while os/exec writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// marked returns the live (non-zombie) processes that carry mark in their
// environment, in pid order, but for those running gpu-hold itself.
func marked(mark string) []int {
	var pids []int
	for pid := range marks.Live(mark) {
		if !runsGpuHold(pid) {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	return pids
}

// runsGpuHold reports whether pid runs one of the binaries under test: a
// hold (waiting in gpu-hold-lobby, too), or the spare maker an eBPF hold starts once its tracker is closed. The
// maker's environment is scrubbed, but from its fork to its exec it shares
// the hold's memory, environment and marker included; it is none of the
// payload's processes a test counts.
func runsGpuHold(pid int) bool {
	exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	dir := filepath.Dir(bin)
	return err == nil && (exe == bin || exe == filepath.Join(dir, "gpu-hold-fleet") || exe == filepath.Join(dir, "gpu-hold-lobby"))
}

// zombie reports whether pid is gone or a zombie.
func zombie(pid int) bool {
	st, err := proc.ReadStat(pid)
	return err != nil || st.Dead()
}

// killMarked kills every process still carrying mark (through pidfds opened
// after the start time was checked: a recycled pid is never hit).
func killMarked(mark string) { marks.Kill(mark) }

// waitUnmarked waits up to limit for no process to carry mark; it returns
// the survivors.
func waitUnmarked(mark string, limit time.Duration) []int {
	deadline := time.Now().Add(limit)
	for {
		pids := marked(mark)
		if len(pids) == 0 || time.Now().After(deadline) {
			return pids
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitFile waits for path to exist (the limit scaled by slowed).
func waitFile(t *testing.T, path string, limit time.Duration) {
	t.Helper()
	limit = slowed(limit)
	deadline := time.Now().Add(limit)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within %v", path, limit)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// backends returns the tracker backends to run a route under. bpf is
// included when it can load; when it cannot, the test fails under CI
// (GPU_HOLD_REQUIRE_BPF=1) and is skipped with the reason elsewhere.
func backends(t *testing.T) []string {
	t.Helper()
	if err := bpfUsable(); err != nil {
		if os.Getenv(testenv.RequireBPF) == "1" {
			t.Fatalf("eBPF tracker unavailable but %s=1: %v", testenv.RequireBPF, err)
		}
		t.Logf("eBPF backend not tested here: %v", err)
		return []string{"proc"}
	}
	return []string{"proc", "bpf"}
}

var bpfProbe struct {
	once sync.Once
	err  error
}

// bpfUsable runs one real hold with --track=bpf; its stderr is the reason when it fails.
func bpfUsable() error {
	bpfProbe.once.Do(func() {
		dir, _ := os.MkdirTemp("", "gpu-hold-probe-")
		defer os.RemoveAll(dir)
		out, err := exec.Command(bin, "--dir", dir, "--log-format", "json", "--track=bpf", "--", "true").CombinedOutput()
		if err != nil {
			bpfProbe.err = errors.New(strings.TrimSpace(string(out)))
		}
	})
	return bpfProbe.err
}

// slowEnv scales the few bounds a route needs to reach its shape (a
// storm's size before its max hold): make test-kernels sets it in a guest
// under TCG, where a hold starts 20-40 times slower. Unset: 1.
const slowEnv = "GPU_HOLD_TEST_SLOW"

// slowed is d scaled by $GPU_HOLD_TEST_SLOW.
func slowed(d time.Duration) time.Duration {
	if f, err := strconv.Atoi(os.Getenv(slowEnv)); err == nil && f > 1 {
		return d * time.Duration(f)
	}
	return d
}

// slow is slowed(d) as a flag value.
func slow(d time.Duration) string { return slowed(d).String() }

// slowText is slow for a flag value given as text ("0" stays "0").
func slowText(v string) string {
	d, err := time.ParseDuration(v)
	if err != nil {
		panic("slowText: " + v + " is not a duration")
	}
	return slow(d)
}

// sh builds a payload that runs script under bash.
func sh(script string) []string { return []string{"bash", "-c", script} }
