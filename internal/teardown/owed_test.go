// owed_test.go checks that a teardown returns only once every process it
// signalled has exited, outside the lineage too: a process of the
// payload's group that leaves it after its TERM, and one the group's KILL
// reaches that no walk saw. Each is frozen (cgroup v1 freezer) when its
// KILL comes, so it is slow to die: a KILLed process still holds its
// files and device memory until its exit is done.
package teardown

import (
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	marks "github.com/gpu-hold/gpu-hold/internal/mark"
	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/testenv"
)

const freezerRoot = "/sys/fs/cgroup/freezer"

// helperEnv makes the test binary run TestHelperOutsider's process: the
// value says what it does on its signal (see TestHelperOutsider).
const helperEnv = "TEARDOWN_TEST_OUTSIDER"

// TestHelperOutsider is not a test of its own: it is the process outside
// the lineage the tests below start. "leave": on TERM, it moves to a group
// of its own; "join PGID": on USR1, it joins group PGID. Either way it
// then writes the file $TEARDOWN_TEST_DONE and sleeps.
func TestHelperOutsider(t *testing.T) {
	what := os.Getenv(helperEnv)
	if what == "" {
		t.Skip("not a test: the helper process the owed tests run, skipped because " + helperEnv + " is unset")
	}
	sig := syscall.SIGTERM
	pgid := 0
	if v, ok := strings.CutPrefix(what, "join "); ok {
		sig = syscall.SIGUSR1
		pgid, _ = strconv.Atoi(v)
	}
	c := make(chan os.Signal, 1)
	signal.Notify(c, sig)
	os.WriteFile(os.Getenv("TEARDOWN_TEST_READY"), nil, 0o644)
	<-c
	if err := unix.Setpgid(0, pgid); err != nil {
		os.Exit(3)
	}
	os.WriteFile(os.Getenv("TEARDOWN_TEST_DONE"), nil, 0o644)
	select {}
}

// outsider is one helper process and what the test does to it.
type outsider struct {
	t      *testing.T
	id     proc.Ident
	done   string // the file it writes once it moved
	cg     string // its freezer cgroup
	thawed chan time.Time
}

// startOutsider starts the helper in group pgid (0: its own), marked with
// mark (not the lineage's: the fake tracker must not count it).
func startOutsider(t *testing.T, mark, what string, pgid int) *outsider {
	t.Helper()
	dir := t.TempDir()
	o := &outsider{t: t, done: filepath.Join(dir, "done"), thawed: make(chan time.Time, 1)}
	o.cg = filepath.Join(freezerRoot, "gpu-hold-teardown-"+mark)
	if err := os.Mkdir(o.cg, 0o755); err != nil {
		testenv.Need(t, "a cgroup v1 freezer to keep a KILLed process from exiting (%v)", err)
	}
	t.Cleanup(func() {
		os.WriteFile(filepath.Join(o.cg, "freezer.state"), []byte("THAWED"), 0)
		marks.Kill(mark)
		for i := 0; i < 100 && os.Remove(o.cg) != nil; i++ {
			time.Sleep(50 * time.Millisecond)
		}
	})
	ready := filepath.Join(dir, "ready")
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperOutsider$")
	cmd.Env = append(os.Environ(), marks.Env+"="+mark, helperEnv+"="+what, "TEARDOWN_TEST_READY="+ready, "TEARDOWN_TEST_DONE="+o.done)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: pgid}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go cmd.Wait()
	st, err := proc.ReadStat(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	o.id = st.Ident
	o.await(ready, "set its signal handler")
	return o
}

// await waits, bounded, for file.
func (o *outsider) await(file, what string) {
	o.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(file); err == nil {
			return
		}
		if time.Now().After(deadline) {
			o.t.Fatalf("test shape: the helper %v never %s", o.id, what)
		}
	}
}

// freeze freezes the helper and returns once it is frozen; then, once a
// KILL is pending on it, it thaws it a moment later, and sends the time
// of the thaw on o.thawed.
func (o *outsider) freeze() {
	o.t.Helper()
	o.write("cgroup.procs", strconv.Itoa(o.id.PID))
	o.write("freezer.state", "FROZEN")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if b, _ := os.ReadFile(filepath.Join(o.cg, "freezer.state")); strings.TrimSpace(string(b)) == "FROZEN" {
			break
		}
		if time.Now().After(deadline) {
			o.t.Fatalf("test shape: the freezer did not freeze %v", o.id)
		}
	}
	go func() {
		for !sigMask(o.id.PID, "ShdPnd", syscall.SIGKILL) && !sigMask(o.id.PID, "SigPnd", syscall.SIGKILL) {
			if !proc.Alive(o.id) {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(300 * time.Millisecond)
		thaw := time.Now()
		os.WriteFile(filepath.Join(o.cg, "freezer.state"), []byte("THAWED"), 0)
		o.thawed <- thaw
	}()
}

func (o *outsider) write(name, v string) {
	o.t.Helper()
	if err := os.WriteFile(filepath.Join(o.cg, name), []byte(v), 0); err != nil {
		o.t.Fatalf("test shape: writing %s to %s: %v", v, filepath.Join(o.cg, name), err)
	}
}

// wantExitedBefore fails unless the helper had exited (and was thawed)
// when the teardown returned at end, without being a survivor.
func (o *outsider) wantExitedBefore(end time.Time, out Outcome) {
	o.t.Helper()
	if st, err := proc.ReadStat(o.id.PID); err == nil && st.Start == o.id.Start && !st.Dead() {
		o.t.Fatalf("the teardown returned while %v, a process it signalled, was alive (state %c): the token would go to the next job with its files and memory held", o.id, st.State)
	}
	select {
	case thaw := <-o.thawed:
		if end.Before(thaw) {
			o.t.Errorf("the teardown returned at %v, before the helper was thawed at %v", end, thaw)
		}
	default:
		o.t.Errorf("the helper was never thawed: its KILL never came")
	}
	for _, s := range out.Survivors {
		if s.Ident == o.id {
			o.t.Errorf("%v is a survivor, though it exited within the survivor bound", o.id)
		}
	}
}

// groupLeader starts the payload's own process, in a group of its own and
// in the lineage, left unreaped (as a hold leaves its payload) until the
// test ends.
func groupLeader(t *testing.T, l *lineage) proc.Ident {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	cmd.Env = append(os.Environ(), marks.Env+"="+l.mark)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	st, err := proc.ReadStat(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	l.sleeping(st.Ident)
	return st.Ident
}

// A process of the payload's group, outside the lineage, moves to a group
// of its own when it gets its TERM: the teardown still KILLs it, and
// returns only once it has exited.
func TestTermedLeaverWaitedFor(t *testing.T) {
	testenv.NeedRoot(t, "a cgroup v1 freezer")
	t.Parallel()
	l := newLineage(t)
	root := groupLeader(t, l)
	o := startOutsider(t, marks.New(), "leave", root.PID)
	td := &Teardown{Tracker: &fakeTracker{mark: l.mark}, PGID: root.PID, Root: root, Grace: time.Second, SurvivorWait: time.Minute,
		Log: zerolog.New(zerolog.NewTestWriter(t)), Fate: l.fates.note}
	td.OnKill = func(time.Time) {
		o.await(o.done, "left the group on its TERM")
		o.freeze()
	}
	out := td.Run()
	if _, err := os.Stat(o.done); err != nil {
		t.Fatalf("test shape: the helper never left the group (%v): it got no TERM", err)
	}
	o.wantExitedBefore(time.Now(), out)
}

// A process joins the payload's group after the last walk, just before
// the group's KILL (at the seal): the KILL reaches it, and the teardown
// returns only once it has exited.
func TestGroupKillReachesUnseenJoiner(t *testing.T) {
	testenv.NeedRoot(t, "a cgroup v1 freezer")
	t.Parallel()
	l := newLineage(t)
	root := groupLeader(t, l)
	o := startOutsider(t, marks.New(), "join "+strconv.Itoa(root.PID), 0)
	tr := &sealHook{fakeTracker: fakeTracker{mark: l.mark}, seal: func() {
		if err := proc.Signal(o.id, syscall.SIGUSR1); err != nil {
			t.Errorf("test shape: signalling the helper: %v", err)
		}
		o.await(o.done, "joined the payload's group")
		o.freeze()
	}}
	td := &Teardown{Tracker: tr, PGID: root.PID, Root: root, Grace: 5 * time.Second, SurvivorWait: time.Minute,
		Log: zerolog.New(zerolog.NewTestWriter(t)), Fate: l.fates.note}
	out := td.Run()
	o.wantExitedBefore(time.Now(), out)
}

// sealHook is the fake tracker with a hook at its seal, which comes after
// the grace's last walk and before the KILL.
type sealHook struct {
	fakeTracker
	seal func()
}

func (s *sealHook) Seal() error { s.seal(); return nil }
