// routes_test.go owns what the escape-route tests share beyond the harness:
// the rig a route runs under (backend flags, binary, user), payload scripts
// written to a scratch dir, the "hold ended" log line, and the checks every
// route ends with (nothing marked left, token released).
package test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	marks "github.com/gpu-hold/gpu-hold/internal/mark"
	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/testenv"
)

// rig is how a route's holds are run: which backend flags, which binary,
// as which user.
type rig struct {
	Name  string              // subtest name: proc, bpf, auto-unprivileged
	Track []string            // flags that select the backend
	Bin   string              // binary; "" = the harness's
	Cred  *syscall.Credential // run the hold as this user; nil = as the test
	Env   []string            // more environment for the hold
}

// rigFor returns the rig of a backend. The procfs tracker runs without a
// cgroup, so that it alone does the work; bpf keeps the default
// containment (--cgroup=auto).
func rigFor(be string) rig {
	if be == "proc" {
		return rig{Name: be, Track: []string{"--track=proc", "--cgroup=off"}}
	}
	return rig{Name: be, Track: []string{"--track=" + be}}
}

// forBackends runs route once per backend, each as a subtest. With parallel,
// the route's top-level test and its subtests run in parallel with others.
func forBackends(t *testing.T, parallel bool, route func(*testing.T, rig)) {
	t.Helper()
	bes := backends(t) // before t.Parallel: the probe is not goroutine-safe
	if parallel {
		t.Parallel()
	}
	for _, be := range bes {
		rg := rigFor(be)
		t.Run(be, func(t *testing.T) {
			if parallel {
				t.Parallel()
			}
			route(t, rg)
		})
	}
}

// dirs returns a directory for a route's scripts and marker files, and
// one for its queue. Under an unprivileged rig both are open to everyone.
func (rg rig) dirs(t *testing.T) (scratch, qdir string) {
	t.Helper()
	if rg.Cred == nil {
		return t.TempDir(), t.TempDir()
	}
	scratch, qdir = openDir(t), openDir(t)
	// The queue dir belongs to the user (a world-writable one is refused).
	if err := os.Chown(qdir, int(rg.Cred.Uid), int(rg.Cred.Gid)); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(qdir, 0o755); err != nil {
		t.Fatal(err)
	}
	return scratch, qdir
}

// openDir makes a temporary directory that any user can use (mode 1777).
func openDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "gpu-hold-test-open-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	return d
}

// start starts a hold under rg. scratch (may be "") is given to payload
// scripts as $GH_T.
func (rg rig) start(t *testing.T, qdir, mark, scratch string, args ...string) *started {
	t.Helper()
	h := newHold(t, qdir, mark, append(append([]string{}, rg.Track...), args...)...)
	if scratch != "" {
		h.Env = append(h.Env, "GH_T="+scratch)
	}
	h.Env = append(h.Env, rg.Env...)
	// As the harness's Start, but with another binary or user when rg says
	// so, and output to files.
	b := rg.Bin
	if b == "" {
		b = bin
	}
	s := &started{hold: h, stdout: tempFile(t, "stdout"), stderr: tempFile(t, "stderr")}
	h.Cmd = exec.Command(b, append([]string{"--dir", h.Dir, "--log-format", "json"}, h.Args...)...)
	h.Cmd.Env = append(append(os.Environ(), markEnv+"="+h.Mark), h.Env...)
	h.Cmd.Stdout, h.Cmd.Stderr = s.stdout, s.stderr
	h.Cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: rg.Cred}
	h.t0 = time.Now()
	if err := h.Cmd.Start(); err != nil {
		t.Fatalf("starting gpu-hold: %v", err)
	}
	t.Cleanup(func() {
		if h.Cmd.ProcessState == nil {
			h.Cmd.Process.Kill()
			h.Cmd.Wait()
		}
	})
	return s
}

// started is a hold started by rig.start. Its stdout and stderr are files,
// not pipes: os/exec's Wait then returns the instant the hold exits, however
// long a process the hold failed to end keeps them open, so what is alive
// "when the hold returned" is checked at its real return.
type started struct {
	*hold
	stdout, stderr *os.File
}

// Wait waits for the hold to exit, failing the test after limit (scaled
// by bound).
func (s *started) Wait(limit time.Duration) result {
	t := s.t
	t.Helper()
	limit = bound(limit)
	done := make(chan struct{})
	go func() { s.Cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(limit):
		s.Cmd.Process.Kill()
		<-done
		t.Fatalf("gpu-hold %v did not return within %v\nstderr:\n%s", s.Args, limit, s.Stderr())
	}
	r := result{Code: s.Cmd.ProcessState.ExitCode(), Elapsed: time.Since(s.t0), End: time.Now(), Stderr: s.Stderr()}
	if b, err := os.ReadFile(s.stdout.Name()); err == nil {
		r.Stdout = string(b)
	}
	if ws, ok := s.Cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		r.Code = 128 + int(ws.Signal())
	}
	return r
}

// Stderr returns what the hold wrote to stderr so far.
func (s *started) Stderr() string {
	b, _ := os.ReadFile(s.stderr.Name())
	return string(b)
}

// tempFile creates a file for a hold's output, closed after the test.
func tempFile(t *testing.T, name string) *os.File {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// waitDelay bounds how long Wait waits for output pipes after the process
// exited: a process the hold failed to end keeps them open.
const waitDelay = 2 * time.Second

// prelude is put before every payload script: put NAME VALUE writes a file
// atomically, await NAME waits for one; both are exported to child bashes.
const prelude = `put() { echo "$2" > "$GH_T/$1.tmp" && mv "$GH_T/$1.tmp" "$GH_T/$1"; }
await() { until [ -e "$GH_T/$1" ]; do sleep 0.01; done; }
export -f put await
`

// script writes a bash script into dir and returns the payload that runs it.
func script(t *testing.T, dir, name, body string) []string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(prelude+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return []string{"bash", p}
}

// readPid waits for a file written by put and returns the pid in it.
func readPid(t *testing.T, path string, limit time.Duration) int {
	t.Helper()
	waitFile(t, path, limit)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return pid
}

// stat reads a process's stat, failing the test when it is gone.
func stat(t *testing.T, pid int) proc.Stat {
	t.Helper()
	st, err := proc.ReadStat(pid)
	if err != nil {
		t.Fatalf("reading /proc/%d/stat: %v", pid, err)
	}
	return st
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// survivor is one entry of the "survivors" field of "hold ended".
type survivor struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start"`
}

// ended is the "hold ended" log line.
type ended struct {
	Msg          string     `json:"msg"`
	Message      string     `json:"message"` // zerolog's name for msg
	ExitCode     *int       `json:"exit_code"`
	Cause        string     `json:"cause"`
	Survivors    []survivor `json:"survivors"`
	Kill         int        `json:"kill"`          // processes sent KILL one by one
	CgroupKilled bool       `json:"cgroup_killed"` // the payload's cgroup was killed whole
	ProcWalks    int        `json:"proc_walks"`    // teardown passes that read every process in /proc
}

// holdEnded returns the last "hold ended" line of the hold's stderr.
func holdEnded(t *testing.T, r result) (ended, bool) {
	t.Helper()
	var last ended
	found := false
	sc := bufio.NewScanner(strings.NewReader(r.Stderr))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e ended
		if json.Unmarshal(sc.Bytes(), &e) == nil && (e.Msg == "hold ended" || e.Message == "hold ended") {
			last, found = e, true
		}
	}
	return last, found
}

// requireEnd checks the hold's exit code, the "hold ended" line agreeing
// with it, and, unless survivorsOK, that it reports no survivor.
func requireEnd(t *testing.T, r result, want int, survivorsOK bool) ended {
	t.Helper()
	if r.Code != want {
		t.Errorf("gpu-hold exited %d, want %d\nstderr:\n%s", r.Code, want, r.Stderr)
	}
	e, ok := holdEnded(t, r)
	if !ok {
		t.Errorf("no \"hold ended\" line on stderr:\n%s", r.Stderr)
		return e
	}
	if e.ExitCode == nil || *e.ExitCode != want {
		t.Errorf("\"hold ended\" exit_code = %v, want %d", e.ExitCode, want)
	}
	if !survivorsOK && len(e.Survivors) != 0 {
		t.Errorf("\"hold ended\" reports survivors %v, want none\nstderr:\n%s", e.Survivors, r.Stderr)
	}
	return e
}

// requireNoneLeft checks that no process carrying mark is alive now, when
// the hold has returned: the token is released only after the whole tree
// is dead, so nothing may be alive even an instant later.
func requireNoneLeft(t *testing.T, mark string) {
	t.Helper()
	left := marked(mark)
	if len(left) == 0 {
		return
	}
	desc := describe(left)
	later := waitUnmarked(mark, 2*time.Second)
	killMarked(mark)
	t.Errorf("%d marked process(es) alive when the hold returned (%d still alive 2s later): %s", len(left), len(later), desc)
}

// describe names processes for failure messages.
func describe(pids []int) string {
	var b strings.Builder
	for i, pid := range pids {
		if i == 20 {
			fmt.Fprintf(&b, " ... and %d more", len(pids)-i)
			break
		}
		st, err := proc.ReadStat(pid)
		if err != nil {
			fmt.Fprintf(&b, " [%d gone]", pid)
			continue
		}
		fmt.Fprintf(&b, " [pid %d %s state %c ppid %d pgid %d sid %d]", pid, st.Comm, st.State, st.PPID, st.PGID, st.SID)
	}
	return b.String()
}

// requireReleased checks that the token of qdir is free: a second hold on
// the same dir takes it and runs at once (-w 3s would end it with 75).
func requireReleased(t *testing.T, rg rig, qdir string) {
	t.Helper()
	mark := newMark(t)
	r := rg.start(t, qdir, mark, "", "-w", bound(3*time.Second).String(), "-g", "1s", "--survivor-wait", "1s", "--", "true").Wait(20 * time.Second)
	if r.Code != 0 || r.Elapsed > bound(2500*time.Millisecond) {
		t.Errorf("token not released: a second hold on the same dir exited %d after %v\nstderr:\n%s", r.Code, r.Elapsed.Round(time.Millisecond), r.Stderr)
	}
	if strings.Contains(strings.ToLower(r.Stderr), "dead holder") {
		t.Errorf("token not released: the second hold took it over from a dead holder\nstderr:\n%s", r.Stderr)
	}
}

// signalMarked sends sig to pid through a pidfd, after checking through
// that pidfd that the process is alive and still carries mark.
func signalMarked(t *testing.T, pid int, mark string, sig syscall.Signal) {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatalf("pidfd_open(%d): %v", pid, err)
	}
	defer unix.Close(fd)
	// An exec in progress shows an empty environment for a moment (the
	// new program's name is set before its environment): look again
	// briefly before concluding the pid is no longer ours.
	for deadline := time.Now().Add(2 * time.Second); !marks.Carries(pid, mark) || zombie(pid); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d no longer carries the test's marker", pid)
		}
	}
	if err := unix.PidfdSendSignal(fd, sig, nil, 0); err != nil {
		t.Fatalf("pidfd_send_signal(%d, %v): %v", pid, sig, err)
	}
}

// nobody is the unprivileged user tests run holds as.
var nobody = &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}

// unprivileged returns a rig that runs holds as uid 65534 with --track=auto,
// from a copy of the binary that user can execute.
func unprivileged(t *testing.T) rig {
	t.Helper()
	testenv.NeedRoot(t, "running a hold as uid 65534")
	d := openDir(t)
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(d, "gpu-hold")
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return rig{Name: "auto-unprivileged", Track: []string{"--track=auto"}, Bin: p, Cred: nobody}
}

// waitComm waits for pid to run a program named comm (its exec done).
func waitComm(t *testing.T, pid int, comm string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		st, err := proc.ReadStat(pid)
		if err == nil && st.Comm == comm {
			return
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("pid %d did not come to run %s within %v (%+v, %v)", pid, comm, limit, st, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
