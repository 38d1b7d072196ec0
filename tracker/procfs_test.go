// procfs_test.go checks how the procfs backend paces its walks (by the CPU
// they cost the hold, never by the wall time a busy machine stretches them
// to), when it trusts the exit status a zombie's stat shows, that an
// adopted zombie's exit is recorded from its reap, and that its reaping
// spread over goroutines reaps and records every zombie once.
package tracker

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	marks "github.com/gpu-hold/gpu-hold/internal/mark"
	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/record"
	"github.com/gpu-hold/gpu-hold/internal/testenv"
)

func TestWalkDelay(t *testing.T) {
	for cpu, want := range map[time.Duration]time.Duration{
		0:                     procWalkInterval,
		time.Millisecond:      procWalkInterval,
		40 * time.Millisecond: 800 * time.Millisecond,
		time.Second:           20 * time.Second,
	} {
		if got := walkDelay(cpu); got != want {
			t.Errorf("walkDelay(%v) = %v, want %v", cpu, got, want)
		}
	}
}

// A walk that waits (here: sleeps) costs no CPU, so it must not push the
// next walk back. Not parallel: the cost is the whole process's CPU.
func TestWalkCostIsCPU(t *testing.T) {
	cost := cpuCost(func() { time.Sleep(300 * time.Millisecond) })
	if cost >= 150*time.Millisecond {
		t.Fatalf("sleeping 300 ms cost %v: the walk's cost is wall time, not CPU", cost)
	}
	spun := cpuCost(func() {
		end, stop := holdCPU()+20*time.Millisecond, time.Now().Add(10*time.Second)
		for holdCPU() < end && time.Now().Before(stop) {
		}
	})
	if spun < 20*time.Millisecond {
		t.Fatalf("spinning for 20 ms of CPU cost %v", spun)
	}
}

// A hold without CAP_SYS_PTRACE must not take the 0 the kernel shows it in
// place of another user's zombie's exit status for an exit 0: it records
// the status as unknown. With the capability, or for a zombie of its own
// ids, it records the status.
func TestZombieStatusTrust(t *testing.T) {
	testenv.NeedRoot(t, "starting a process as another user")
	own, other := zombieChild(t, 3, nil), zombieChild(t, 3, &syscall.Credential{Uid: 65534, Gid: 65534})
	for _, c := range []struct {
		ptrace bool
		st     proc.Stat
		want   bool
	}{{false, own, true}, {false, other, false}, {true, other, true}} {
		ws := (&procTracker{ptrace: c.ptrace}).statusOf(c.st)
		switch {
		case c.want && (ws == nil || ws.ExitStatus() != 3):
			t.Errorf("ptrace %v, zombie uid-own %v: status %v, want exit 3", c.ptrace, c.st == own, ws)
		case !c.want && ws != nil:
			t.Errorf("ptrace %v, another user's zombie: status %v, want unknown", c.ptrace, *ws)
		}
	}
}

// marked is a child of the test started by startMarked.
type marked struct {
	pid   int
	stdin io.WriteCloser
}

// startMarked starts argv as a marked child of the test (as cred when not
// nil), with a pipe on its stdin; a cleanup closes that pipe and waits for
// the child, should the test not have reaped it (the children it starts
// all end at the latest on end of input).
func startMarked(t *testing.T, argv []string, cred *syscall.Credential) marked {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), marks.Env+"="+marks.New())
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() { in.Close(); unix.Wait4(pid, nil, 0, nil) })
	return marked{pid, in}
}

// zombieChild starts a marked child of the test that exits with code and
// returns its stat once it is a zombie.
func zombieChild(t *testing.T, code int, cred *syscall.Credential) proc.Stat {
	t.Helper()
	return waitDead(t, startMarked(t, []string{"sh", "-c", fmt.Sprintf("exit %d", code)}, cred).pid)
}

// waitDead returns the stat of the test's child pid once it is a zombie.
func waitDead(t *testing.T, pid int) proc.Stat {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		st, err := proc.ReadStat(pid)
		if err != nil {
			t.Fatal(err)
		}
		if st.Dead() {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d never exited", pid)
		}
	}
}

// TestAdoptedExitFromReap: a zombie the hold reaps has its exit recorded
// from the reap's exact status, never first from its stat, which a hold
// without CAP_SYS_PTRACE is not shown for another user's process. Both
// kinds are checked: one seen alive by an earlier walk, one never seen
// alive. Fails when a walk records an adopted zombie's exit before the reap.
func TestAdoptedExitFromReap(t *testing.T) {
	testenv.NeedRoot(t, "starting a process as another user")
	other := &syscall.Credential{Uid: 65534, Gid: 65534}
	exits := map[int][]int{}
	tr := &procTracker{self: os.Getpid(), seen: map[proc.Ident]*procMember{}, byPID: map[int]proc.Ident{}, opts: Options{Sink: func(ev record.Event) {
		if ev.Kind == record.Exit {
			code := -1
			if ev.ExitCode != nil {
				code = *ev.ExitCode
			}
			exits[ev.Ident.PID] = append(exits[ev.Ident.PID], code)
		}
	}}}
	walk := func() {
		t.Helper()
		s, err := proc.TakeSnapshot()
		if err != nil {
			t.Fatal(err)
		}
		tr.LiveIn(s)
	}
	seen := startMarked(t, []string{"sh", "-c", "read x; exit 5"}, other)
	walk()
	if _, ok := tr.byPID[seen.pid]; !ok {
		t.Fatalf("the walk did not see %d alive", seen.pid)
	}
	seen.stdin.Close()
	waitDead(t, seen.pid)
	never := zombieChild(t, 6, other)
	walk()
	for pid, want := range map[int]int{seen.pid: 5, never.PID: 6} {
		if got := exits[pid]; len(got) != 1 || got[0] != want {
			t.Errorf("zombie %d (exit %d): recorded exits %v, want exactly [%d]", pid, want, got, want)
		}
		if _, err := unix.Wait4(pid, nil, unix.WNOHANG, nil); err != unix.ECHILD {
			t.Errorf("zombie %d: not reaped (wait4: %v)", pid, err)
		}
	}
}

// TestReapAllInParts: zombies reaped on several goroutines are each reaped
// and recorded once, with their own status. Fails when a part is skipped
// or reaped twice, or a status goes to the wrong process.
func TestReapAllInParts(t *testing.T) {
	const n = 41
	var zs []proc.Stat
	for i := range n {
		zs = append(zs, zombieChild(t, i+1, nil))
	}
	var mu sync.Mutex
	exits := map[int][]int{} // pid -> exit codes recorded
	tr := &procTracker{seen: map[proc.Ident]*procMember{}, byPID: map[int]proc.Ident{}, opts: Options{Sink: func(ev record.Event) {
		if ev.Kind != record.Exit {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		code := -1
		if ev.ExitCode != nil {
			code = *ev.ExitCode
		}
		exits[ev.Ident.PID] = append(exits[ev.Ident.PID], code)
	}}}
	tr.reapAll(zs, 3)
	for i, st := range zs {
		if got := exits[st.PID]; len(got) != 1 || got[0] != i+1 {
			t.Errorf("zombie %d (exit %d): recorded exits %v, want exactly [%d]", st.PID, i+1, got, i+1)
		}
		if _, err := unix.Wait4(st.PID, nil, unix.WNOHANG, nil); err != unix.ECHILD {
			t.Errorf("zombie %d: not reaped (wait4: %v)", st.PID, err)
		}
	}
}

// TestAccountBeforeSeal: procfs's account is known before the seal (a
// teardown's first pass asks it, to read the lineage alone) and counts
// every child of the hold but the payload's zombie: a live one, and one
// dead but not reaped. Fails when the account waits for the seal, or
// skips zombies (a process that forks and exits in a loop leaves only
// those behind at the instant of a read).
func TestAccountBeforeSeal(t *testing.T) {
	self := os.Getpid()
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if kids, err := proc.Children(self); err != nil {
			testenv.Need(t, "the kernel's children lists: %v", err)
		} else if len(kids) == 0 {
			break
		}
		if time.Now().After(end) {
			t.Fatal("test shape: the test process still has children of other tests after 5 s")
		}
	}
	payload := startMarked(t, []string{"sh", "-c", "read x"}, nil)
	st, err := proc.ReadStat(payload.pid)
	if err != nil {
		t.Fatal(err)
	}
	tr := &procTracker{self: self, root: st.Ident, seen: map[proc.Ident]*procMember{}, byPID: map[int]proc.Ident{}}
	want := func(step string, some bool) {
		t.Helper()
		if gotSome, known, _ := tr.account(); !known || gotSome != some {
			t.Errorf("%s: account() = some %v, known %v; want some %v, known", step, gotSome, known, some)
		}
	}
	want("payload alive", true)
	payload.stdin.Close()
	waitDead(t, payload.pid)
	want("payload a zombie, nothing else", false)
	other := startMarked(t, []string{"sh", "-c", "read x"}, nil)
	want("another child alive", true)
	other.stdin.Close()
	waitDead(t, other.pid)
	want("another child a zombie", true)
	if _, err := unix.Wait4(other.pid, nil, 0, nil); err != nil {
		t.Fatal(err)
	}
	want("the other reaped", false)
}

// TestLargeLineageIsWalked: a lineage with most of the host's threads is
// read by a walk of /proc, not through one children list per thread; a
// small one through the lists. Fails when the descent is taken whatever
// the lineage's size, or never.
func TestLargeLineageIsWalked(t *testing.T) {
	self, err := proc.Self()
	if err != nil {
		t.Fatal(err)
	}
	tr := &procTracker{self: self.PID, seen: map[proc.Ident]*procMember{}, byPID: map[int]proc.Ident{}}
	member := proc.Ident{PID: 1 << 30, Start: 1}
	tr.seen[member] = &procMember{stat: proc.Stat{Ident: member, Threads: 1}}
	tr.byPID[member.PID] = member
	if _, ok := tr.snapshot(); !ok {
		t.Errorf("a lineage of one thread: snapshot says walk /proc, want the children lists")
	}
	tr.seen[member].stat.Threads = hostTasks()
	if _, ok := tr.snapshot(); ok {
		t.Errorf("a lineage of %d threads (the host's count): snapshot reads the children lists, want a walk", hostTasks())
	}
}
