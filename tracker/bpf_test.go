// bpf_test.go tests the eBPF backend against real payloads: it loads the
// programs for real (as root), launches bash payloads the way the hold does,
// and checks what the kernel's lineage saw. Every process a test starts
// carries a unique marker in its environment; the tests only ever signal
// processes that still carry it.
package tracker

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/bpf"
	marks "github.com/gpu-hold/gpu-hold/internal/mark"
	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/record"
	"github.com/gpu-hold/gpu-hold/internal/testenv"
	"github.com/gpu-hold/gpu-hold/internal/teststock"
)

const (
	// btThreadForkEnv makes the test binary a helper that forks from a
	// thread other than its main one (see init below).
	btThreadForkEnv = "GPU_HOLD_TEST_THREADFORK"
)

// init turns the test binary into the thread-fork helper when asked: while
// init runs, the main goroutine is locked to the main thread, so a goroutine
// that locks its own OS thread is on another thread of the same process.
func init() {
	if os.Getenv(btThreadForkEnv) != "1" {
		return
	}
	done := make(chan string)
	go func() {
		runtime.LockOSThread()
		tid := unix.Gettid()
		c := exec.Command("sleep", "300")
		if err := c.Start(); err != nil {
			done <- "error " + err.Error()
			return
		}
		done <- fmt.Sprintf("tid=%d pid=%d child=%d", tid, os.Getpid(), c.Process.Pid)
	}()
	fmt.Println(<-done)
	for { // stay alive until killed (a bare select{} is a deadlock crash)
		time.Sleep(time.Hour)
	}
}

// btNeedBPF skips (or, in CI, fails) when the eBPF backend cannot load here.
func btNeedBPF(t *testing.T) {
	t.Helper()
	testenv.NeedBPF(t, ProbeBPF())
}

func btNewMark(t *testing.T) string {
	t.Helper()
	m := marks.New()
	t.Cleanup(func() { marks.Kill(m) })
	return m
}

// btSink collects events.
type btSink struct {
	mu  sync.Mutex
	evs []record.Event
}

func (s *btSink) add(ev record.Event) {
	s.mu.Lock()
	s.evs = append(s.evs, ev)
	s.mu.Unlock()
}

func (s *btSink) events() []record.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.evs)
}

func (s *btSink) count(k record.Kind) int {
	n := 0
	for _, ev := range s.events() {
		if ev.Kind == k {
			n++
		}
	}
	return n
}

// btTracker loads a tracker for a hold id unique to the test, with the
// seal this host chooses (GPU_HOLD_BPF_SEAL may force one).
func btTracker(t *testing.T) (*Lineage, *btSink) { return btTrackerSeal(t, "") }

// btTrackerSeal is btTracker with a given seal ("": the host's).
func btTrackerSeal(t *testing.T, seal bpf.SealMode) (*Lineage, *btSink) {
	t.Helper()
	btNeedBPF(t)
	sink := &btSink{}
	var b [4]byte
	rand.Read(b[:])
	tr, err := New(BackendBPF, Options{Sink: sink.add, HoldID: "test-" + hex.EncodeToString(b[:]), Seal: seal})
	if err != nil {
		t.Fatalf("New(bpf): %v", err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr, sink
}

// btLaunch starts a marked payload under tr the way the hold does.
func btLaunch(t *testing.T, tr *Lineage, mark string, env []string, name string, args ...string) (*exec.Cmd, proc.Ident) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(append(os.Environ(), marks.Env+"="+mark), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := tr.Prepare(cmd); err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	st, err := proc.ReadStat(cmd.Process.Pid)
	if err != nil {
		t.Fatalf("reading the payload's stat: %v", err)
	}
	if err := tr.Started(st.Ident); err != nil {
		t.Fatalf("Started: %v", err)
	}
	return cmd, st.Ident
}

// btWaitFor polls cond until it holds, failing after limit.
func btWaitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func btLivePIDs(t *testing.T, tr *Lineage) map[int]proc.Stat {
	t.Helper()
	live, err := tr.Live()
	if err != nil {
		t.Fatalf("Live: %v", err)
	}
	out := make(map[int]proc.Stat, len(live))
	for _, st := range live {
		out[st.PID] = st
	}
	return out
}

func btKeys(m map[int]proc.Stat) []int {
	var ks []int
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// btSameAsMarked waits until the marked live processes are exactly the
// wanted shape (n processes, all running comm unless it is ""), then checks Live() is exactly
// that set.
func btSameAsMarked(t *testing.T, tr *Lineage, mark string, n int, comm string) map[int]proc.Stat {
	t.Helper()
	var marked map[int]proc.Stat
	defer func() {
		if t.Failed() {
			for _, st := range marked {
				t.Logf("marked: %+v", st)
			}
		}
	}()
	btWaitFor(t, 10*time.Second, fmt.Sprintf("%d marked %q processes", n, comm), func() bool {
		marked = marks.Live(mark)
		if len(marked) != n {
			return false
		}
		for _, st := range marked {
			if comm != "" && st.Comm != comm {
				return false
			}
		}
		return true
	})
	live := btLivePIDs(t, tr)
	if !slices.Equal(btKeys(live), btKeys(marked)) {
		t.Fatalf("Live() = %v, want the marked processes %v", btKeys(live), btKeys(marked))
	}
	return live
}

func TestBPFFirstActIsFork(t *testing.T) {
	tr, _ := btTracker(t)
	mark := btNewMark(t)
	_, root := btLaunch(t, tr, mark, nil, "bash", "-c", "sleep 300 & exec sleep 301")
	live := btSameAsMarked(t, tr, mark, 2, "sleep")
	if _, ok := live[root.PID]; !ok {
		t.Fatalf("the payload %v is not in Live(): %v", root, btKeys(live))
	}
	if live[root.PID].Start != root.Start {
		t.Fatalf("payload start %d in Live, %d at launch", live[root.PID].Start, root.Start)
	}
}

func TestBPFEscapesStayMembers(t *testing.T) {
	tr, _ := btTracker(t)
	mark := btNewMark(t)
	// setsid child; double fork (parent subshell exits); setsid + double fork
	// through a second bash; and the payload itself.
	script := `setsid sleep 300 &
( sleep 300 & ) 
setsid bash -c '( sleep 300 & ) ; exit 0' &
bash -c 'sleep 300 & exit 0'
exec sleep 300`
	_, _ = btLaunch(t, tr, mark, nil, "bash", "-c", script)
	live := btSameAsMarked(t, tr, mark, 5, "sleep")
	sids := map[int]bool{}
	for _, st := range live {
		sids[st.SID] = true
	}
	if len(sids) < 2 {
		t.Fatalf("expected members in at least two sessions, got %v", sids)
	}
}

func TestBPFThreadThatForks(t *testing.T) {
	tr, _ := btTracker(t)
	mark := btNewMark(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), marks.Env+"="+mark, btThreadForkEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Prepare(cmd); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	st, err := proc.ReadStat(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Started(st.Ident); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the helper: %v", err)
	}
	var tid, pid, child int
	if _, err := fmt.Sscanf(line, "tid=%d pid=%d child=%d", &tid, &pid, &child); err != nil {
		t.Fatalf("helper said %q", line)
	}
	if tid == pid {
		t.Fatalf("the helper forked from its main thread (tid %d), not from another thread", tid)
	}
	live := btSameAsMarked(t, tr, mark, 2, "")
	if _, ok := live[child]; !ok {
		t.Fatalf("the child %d forked by thread %d of %d is not in Live(): %v", child, tid, pid, btKeys(live))
	}
}

func TestBPFEventsAndExitCodes(t *testing.T) {
	tr, sink := btTracker(t)
	mark := btNewMark(t)
	dir := t.TempDir()
	pidfile := filepath.Join(dir, "pid")
	// A setsid'd member (regroup), a child killed by SIGTERM, then exit 7.
	script := `setsid sleep 300 & sleep 300 & echo $! > ` + pidfile + `; wait $!; exit 7`
	cmd, root := btLaunch(t, tr, mark, nil, "bash", "-c", script)
	var victim int
	btWaitFor(t, 10*time.Second, "the payload's two sleeps", func() bool {
		b, _ := os.ReadFile(pidfile)
		victim, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		sleeps := 0
		for _, st := range marks.Live(mark) {
			if st.Comm == "sleep" {
				sleeps++
			}
		}
		return victim != 0 && sleeps == 2
	})
	btSameAsMarked(t, tr, mark, 3, "") // bash and its two sleeps
	vst, err := proc.ReadStat(victim)
	if err != nil || !marks.Carries(victim, mark) {
		t.Fatalf("victim %d: %v", victim, err)
	}
	if err := proc.Signal(vst.Ident, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 7 {
		t.Fatalf("payload exited %d, want 7", code)
	}
	// Wait for the root's exit event, then stop.
	btWaitFor(t, 5*time.Second, "the payload's exit event", func() bool {
		for _, ev := range sink.events() {
			if ev.Kind == record.Exit && ev.Ident == root {
				return true
			}
		}
		return false
	})
	marks.Kill(mark)
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	var rootFork, rootExec, rootExit, victimExit, regroup bool
	for _, ev := range sink.events() {
		if ev.Kind == record.Fork && ev.PPID == os.Getpid() && ev.Ident != root {
			t.Errorf("the hold forked a member besides the payload: %+v", ev)
		}
		if ev.Kind == record.Regroup && ev.Ident == root {
			t.Errorf("the payload's own process group was reported as a regroup: %+v", ev)
		}
		switch {
		case ev.Kind == record.Fork && ev.Ident == root:
			rootFork = ev.PPID == os.Getpid() && ev.UID != nil && *ev.UID == os.Getuid()
		case ev.Kind == record.Exec && ev.Ident == root:
			rootExec = ev.Filename != "" && len(ev.Argv) == 3 && ev.Argv[0] == "bash" && ev.Argv[2] == script
		case ev.Kind == record.Exit && ev.Ident == root:
			rootExit = ev.ExitCode != nil && *ev.ExitCode == 7 && ev.Signal == nil
		case ev.Kind == record.Exit && ev.Ident == vst.Ident:
			victimExit = ev.Signal != nil && *ev.Signal == int(syscall.SIGTERM) && ev.ExitCode == nil
		case ev.Kind == record.Regroup:
			regroup = ev.SID == ev.PID
		}
		if ev.Time.Before(time.Now().Add(-time.Minute)) || ev.Time.After(time.Now().Add(time.Second)) {
			t.Errorf("event time %v is not now-ish: %+v", ev.Time, ev)
		}
	}
	if !rootFork || !rootExec || !rootExit || !victimExit || !regroup {
		t.Fatalf("fork=%v exec=%v exit7=%v sigterm=%v regroup=%v in events:\n%s", rootFork, rootExec, rootExit, victimExit, regroup, btDump(sink.events()))
	}
}

func btDump(evs []record.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		fmt.Fprintf(&b, "%+v\n", ev)
	}
	return b.String()
}

// TestBPFCompleteTree: 500 short-lived processes, some setsid, some
// double-forked, each writing its pid to a log; every one of them must be a
// Fork and an Exit event, with nothing lost.
func TestBPFCompleteTree(t *testing.T) {
	tr, sink := btTracker(t)
	mark := btNewMark(t)
	log := filepath.Join(t.TempDir(), "pids")
	// Per round: a subshell; a setsid bash; a double fork (both halves log).
	script := `for ((i = 0; i < 125; i++)); do
  ( echo $BASHPID >> "$LOG" ) &
  setsid bash -c 'echo $$ >> "$LOG"' &
  ( echo $BASHPID >> "$LOG"; ( echo $BASHPID >> "$LOG" ) & ) &
done
wait`
	cmd, _ := btLaunch(t, tr, mark, []string{"LOG=" + log}, "bash", "-c", script)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("payload: %v", err)
	}
	var pids []int
	btWaitFor(t, 20*time.Second, "500 pids in the log and an empty lineage", func() bool {
		b, _ := os.ReadFile(log)
		pids = pids[:0]
		for _, f := range strings.Fields(string(b)) {
			n, _ := strconv.Atoi(f)
			pids = append(pids, n)
		}
		live, _ := tr.Live()
		return len(pids) == 500 && len(live) == 0
	})
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	forks, exits := map[int]int{}, map[int]int{}
	for _, ev := range sink.events() {
		switch ev.Kind {
		case record.Fork:
			forks[ev.PID]++
		case record.Exit:
			exits[ev.PID]++
		}
	}
	var missing []string
	for _, p := range pids {
		if forks[p] == 0 || exits[p] == 0 {
			missing = append(missing, fmt.Sprintf("%d(fork %d, exit %d)", p, forks[p], exits[p]))
		}
	}
	if len(missing) > 0 {
		t.Errorf("%d of 500 processes missing events: %v", len(missing), missing)
	}
	c := tr.Counters()
	if c.LostEvents != 0 || c.MapOverflow != 0 {
		t.Errorf("counters %+v: want nothing lost", c)
	}
	if c.Members < 500 {
		t.Errorf("counters %+v: want at least 500 members", c)
	}
	t.Logf("%d fork events, %d exit events, counters %+v", len(forks), len(exits), c)
}

// TestBPFSealStopsForkStorm: three members fork as fast as they can; after
// the seal each dies at its next fork (no signal from the test). Under the
// birth seal its child dies with it, at birth; under the fork seal that
// child is a member, flagged born sealed and alive, for the kill passes.
// Kill passes over Live() then leave nothing, under either seal.
func TestBPFSealStopsForkStorm(t *testing.T) {
	for _, seal := range []bpf.SealMode{bpf.SealBirth, bpf.SealFork} {
		t.Run(string(seal), func(t *testing.T) {
			btNeedBPF(t)
			if seal == bpf.SealBirth && !slices.Contains(bpf.SealsHere(), seal) {
				t.Skipf("this kernel has no %s (Linux < 6.13): only the fork seal loads here", bpf.SendSignalTask)
			}
			sealStopsForkStorm(t, seal)
		})
	}
}

func sealStopsForkStorm(t *testing.T, seal bpf.SealMode) {
	tr, sink := btTrackerSeal(t, seal)
	if got := tr.SealMode(); got != string(seal) {
		t.Fatalf("SealMode = %q, want %q", got, seal)
	}
	mark := btNewMark(t)
	script := `for j in 1 2 3; do ( while :; do sleep 100 & done ) & done; exec sleep 300`
	cmd, _ := btLaunch(t, tr, mark, nil, "bash", "-c", script)
	btWaitFor(t, 10*time.Second, "the storm to grow", func() bool {
		live, _ := tr.Live()
		return len(live) > 50
	})
	if err := tr.Seal(); err != nil {
		t.Fatal(err)
	}
	// Every storm loop forks again within milliseconds: it dies there
	// (and, under the birth seal, so does the child it forked), with no
	// signal from us.
	if seal == bpf.SealBirth {
		btWaitFor(t, 10*time.Second, "three killed-at-birth events", func() bool { return sink.count(record.KilledAtBirth) >= 3 })
	}
	btWaitFor(t, 5*time.Second, "the storm loops (and under the birth seal their last children) dead by the seal alone", func() bool {
		for _, st := range marks.Live(mark) {
			if st.Comm == "bash" {
				return false
			}
		}
		for _, ev := range sink.events() {
			if ev.Kind == record.KilledAtBirth && proc.Alive(ev.Ident) {
				return false
			}
		}
		return true
	})
	if seal == bpf.SealFork {
		btBornSealedAlive(t, tr, sink)
	}
	deadline := time.Now().Add(10 * time.Second)
	passes := 0
	for {
		live := btLivePIDs(t, tr)
		if len(live) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %d kill passes, still live: %v", passes, btKeys(live))
		}
		for _, st := range live {
			if marks.Carries(st.PID, mark) {
				proc.Signal(st.Ident, syscall.SIGKILL)
			}
		}
		passes++
		time.Sleep(10 * time.Millisecond)
	}
	cmd.Wait()
	if left := marks.Live(mark); len(left) != 0 {
		t.Fatalf("marked processes alive after the kill passes: %v", btKeys(left))
	}
	tr.Close()
	for _, ev := range sink.events() {
		if ev.Kind == record.KilledAtBirth && proc.Alive(ev.Ident) {
			t.Errorf("killed at birth but alive: %+v", ev)
		}
	}
	t.Logf("%d kill passes; %d killed at birth; counters %+v", passes, sink.count(record.KilledAtBirth), tr.Counters())
}

// btBornSealedAlive checks the fork seal's half of the storm: no child was
// killed at birth, and each storm loop's last child is a member flagged
// born sealed and still alive, for the kill passes to end.
func btBornSealedAlive(t *testing.T, tr *Lineage, sink *btSink) {
	t.Helper()
	if n := sink.count(record.KilledAtBirth); n != 0 {
		t.Errorf("%d killed-at-birth events under the fork seal, want none", n)
	}
	ms, err := tr.b.(*bpfTracker).l.Members()
	if err != nil {
		t.Fatal(err)
	}
	alive := 0
	for _, m := range ms {
		if m.Flags&bpf.MemberBornSealed != 0 && proc.Alive(proc.Ident{PID: m.PID, Start: m.StartTicks()}) {
			alive++
		}
	}
	if alive < 3 {
		t.Errorf("%d live members born after the seal, want one per storm loop (3): the fork seal left them to the KILL pass", alive)
	}
}

// TestBPFTwoHoldsApart: two trackers at once each see only their own payload.
func TestBPFTwoHoldsApart(t *testing.T) {
	trA, _ := btTracker(t)
	trB, _ := btTracker(t)
	markA, markB := btNewMark(t), btNewMark(t)
	btLaunch(t, trA, markA, nil, "bash", "-c", "sleep 300 & exec sleep 301")
	btLaunch(t, trB, markB, nil, "bash", "-c", "sleep 300 & sleep 300 & exec sleep 301")
	liveA := btSameAsMarked(t, trA, markA, 2, "sleep")
	liveB := btSameAsMarked(t, trB, markB, 3, "sleep")
	for pid := range liveA {
		if _, ok := liveB[pid]; ok {
			t.Fatalf("pid %d in both holds' lineages", pid)
		}
	}
}

// TestBPFPinnedOutlivesHolder: a pinned lineage keeps tracking after the
// holder closed everything; a successor opens it, sees the new members,
// seals, ends them and unpins.
func TestBPFPinnedOutlivesHolder(t *testing.T) {
	btNeedBPF(t)
	mark := btNewMark(t)
	var b [4]byte
	rand.Read(b[:])
	holdID := "test-pin-" + hex.EncodeToString(b[:])
	tr, err := New(BackendBPF, Options{HoldID: holdID})
	if err != nil {
		t.Fatal(err)
	}
	dir, err := tr.Pin()
	if err != nil {
		tr.Close()
		t.Fatalf("Pin: %v", err)
	}
	t.Cleanup(func() {
		if l, err := bpf.OpenPinned(holdID); err == nil {
			l.Unpin()
			l.Close()
		}
	})
	// The payload forks a new member only after the holder is gone.
	trigger := filepath.Join(t.TempDir(), "go")
	btLaunch(t, tr, mark, nil, "bash", "-c", `while [ ! -e `+trigger+` ]; do sleep 0.02; done; setsid sleep 300 & exec sleep 301`)
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(trigger, nil, 0o600)
	btWaitFor(t, 10*time.Second, "two marked sleeps", func() bool {
		m := marks.Live(mark)
		n := 0
		for _, st := range m {
			if st.Comm == "sleep" {
				n++
			}
		}
		return len(m) == 2 && n == 2
	})

	sink := &btSink{}
	succ, err := OpenPinnedBPF(holdID, Options{Sink: sink.add})
	if err != nil {
		t.Fatalf("OpenPinnedBPF: %v", err)
	}
	defer succ.Close()
	live := btSameAsMarked(t, succ, mark, 2, "sleep")
	if err := succ.Seal(); err != nil {
		t.Fatal(err)
	}
	for _, st := range live {
		proc.Signal(st.Ident, syscall.SIGKILL)
	}
	btWaitFor(t, 5*time.Second, "an empty lineage", func() bool { l, _ := succ.Live(); return len(l) == 0 })
	// The reader drains on a period: give it a few.
	btWaitFor(t, 5*time.Second, "the setsid sleep's fork event from the pinned ring buffer", func() bool { return sink.count(record.Fork) >= 1 })
	if err := succ.Unpin(); err != nil {
		t.Fatalf("Unpin: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("pin dir %s still there: %v", dir, err)
	}
}

// TestBPFQueuedTrackerSleeps: a loaded tracker whose hold still waits in
// the queue (no Prepare yet) has nothing to read and does not wake to
// drain; from the start of reading on, it drains on its period, which
// backs off while there is nothing to read. Thirty queued holds that each
// woke fifty times a second slowed every hand-off; a hold whose payload
// only computes woke as often for hours.
func TestBPFQueuedTrackerSleeps(t *testing.T) {
	btNeedBPF(t)
	tr, err := New(BackendBPF, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	bt := tr.b.(*bpfTracker)
	time.Sleep(5 * readInterval)
	if n := bt.drains.Load(); n != 0 {
		t.Fatalf("%d drains before the hold launched anything, want 0", n)
	}
	bt.startReading()
	btWaitFor(t, 5*time.Second, "drains once reading started", func() bool { return bt.drains.Load() >= 2 })
	// Nothing to read: the drains thin out to one per idleInterval.
	time.Sleep(2 * idleInterval)
	n0 := bt.drains.Load()
	time.Sleep(4 * idleInterval)
	if n := bt.drains.Load() - n0; n > 6 {
		t.Errorf("%d drains in %v of an idle lineage, want about 4 (one per %v)", n, 4*idleInterval, idleInterval)
	}
}

// A closed tracker's lineage goes back to the spares, and the next tracker
// takes it and tracks a payload of its own. Under GPU_HOLD_BPF_SEAL=fork,
// whose spares only spare tests make, each holding the stock's lock, the
// stock counted is this test's.
func TestBPFClosedTrackerIsSpare(t *testing.T) {
	teststock.Own(t, "fork")
	btNeedBPF(t)
	teststock.Fill(t, bpf.SpareStock, func() error { _, err := MakeSpares(); return err }, SpareCount)
	var taken []*Lineage
	for range bpf.SpareStock {
		tr, _ := btTracker(t)
		taken = append(taken, tr)
	}
	if n := SpareCount(); n != 0 {
		t.Fatalf("%d spares left after taking %d, want none", n, bpf.SpareStock)
	}
	mark := btNewMark(t)
	cmd, _ := btLaunch(t, taken[0], mark, nil, "bash", "-c", "true & wait")
	cmd.Wait()
	btWaitFor(t, 10*time.Second, "an empty lineage", func() bool { return len(btLivePIDs(t, taken[0])) == 0 })
	taken[0].Close()
	if n := SpareCount(); n != 1 {
		t.Fatalf("%d spares after a finished tracker closed, want 1 (its lineage given back)", n)
	}
	next, _ := btTracker(t)
	if p := next.Programs(); p != "spare" {
		t.Fatalf("the next tracker's programs were %s, want the recycled spare", p)
	}
	btLaunch(t, next, mark, nil, "bash", "-c", "sleep 300 & exec sleep 301")
	btSameAsMarked(t, next, mark, 2, "sleep")
}

// A tracker that found no spare and loads its own takes one that comes
// back meanwhile (as a chain's lineages do, a moment after each release),
// and its fresh copy, once loaded, goes to the stock. Fails when a load,
// once begun, is waited for whatever comes back, or its copy is freed.
func TestBPFLoadTakesSpareThatCameBack(t *testing.T) {
	teststock.Own(t, "fork")
	btNeedBPF(t)
	teststock.Fill(t, 1, func() error { _, err := MakeSpares(); return err }, SpareCount)
	for SpareCount() > 1 {
		l, err := bpf.TakeSpare("test-came-back-extra")
		if err != nil {
			t.Fatal(err)
		}
		l.Close()
	}
	names, err := os.ReadDir(SpareRoot())
	if err != nil {
		t.Fatal(err)
	}
	var spare string
	for _, e := range names {
		if strings.Contains(e.Name(), "_fork_") {
			spare = filepath.Join(SpareRoot(), e.Name())
		}
	}
	hidden := filepath.Join(SpareRoot(), "making_test-"+strconv.Itoa(os.Getpid()))
	if spare == "" || os.Rename(spare, hidden) != nil || SpareCount() != 0 {
		t.Fatalf("test shape: cannot hide the spare %q (%d spares)", spare, SpareCount())
	}
	t.Cleanup(func() { os.Rename(hidden, spare) })
	back := make(chan struct{})
	maps := bpfMapFDs()
	go func() {
		// Once the fresh load has made its first map (the first look found
		// nothing), well before the load ends.
		for end := time.Now().Add(30 * time.Second); bpfMapFDs() <= maps && time.Now().Before(end); {
			time.Sleep(100 * time.Microsecond)
		}
		os.Rename(hidden, spare)
		close(back)
	}()
	tr, _ := btTracker(t)
	<-back
	if p := tr.Programs(); p != "spare" {
		t.Fatalf("the tracker's programs were %s, want the spare that came back while it loaded", p)
	}
	btWaitFor(t, 10*time.Second, "the unused fresh copy in the stock", func() bool { return SpareCount() == 1 })
}

// bpfMapFDs counts this process's descriptors of BPF maps.
func bpfMapFDs() int {
	fds, _ := os.ReadDir("/proc/self/fd")
	n := 0
	for _, fd := range fds {
		if l, err := os.Readlink("/proc/self/fd/" + fd.Name()); err == nil && l == "anon_inode:bpf-map" {
			n++
		}
	}
	return n
}
