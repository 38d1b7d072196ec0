// teardown_test.go checks the engine alone, against a fake Tracker whose
// lineage is the test's own marked children: TERM within the grace, KILL
// after it, a newborn of the grace waited on and ended, a stopped member
// woken to act on its TERM, and what another uid's authority may not
// signal reported, not signalled.
package teardown

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	marks "github.com/gpu-hold/gpu-hold/internal/mark"
	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/record"
	"github.com/gpu-hold/gpu-hold/internal/testenv"
	"github.com/gpu-hold/gpu-hold/tracker"
)

// fakeTracker's lineage is every live process that carries its marker.
// It cannot report births (Changed is nil), so teardown rescans on its
// timer, as it does for procfs.
type fakeTracker struct{ mark string }

func (f *fakeTracker) Backend() string           { return "fake" }
func (f *fakeTracker) Prepare(*exec.Cmd) error   { return nil }
func (f *fakeTracker) Started(proc.Ident) error  { return nil }
func (f *fakeTracker) Changed() <-chan struct{}  { return nil }
func (f *fakeTracker) Seal() error               { return nil }
func (f *fakeTracker) Counters() record.Counters { return record.Counters{} }
func (f *fakeTracker) Close() error              { return nil }

// A fake keeps no account and finds its members by a walk.
func (f *fakeTracker) Account() (bool, bool, error)     { return false, false, tracker.ErrNotSupported }
func (f *fakeTracker) Snapshot() (*proc.Snapshot, bool) { return nil, false }
func (f *fakeTracker) Live() ([]proc.Stat, error) {
	s, err := proc.TakeSnapshot()
	return f.LiveIn(s), err
}

// A member is a live process that carries the mark, or a child of one. A
// child caught in its exec has an environment that reads empty for an
// instant, which a loaded host stretches: marks.Live reads it again, and
// its parent's mark covers it meanwhile, as a real tracker (the eBPF
// account, procfs's children) would still have it.
func (f *fakeTracker) LiveIn(s *proc.Snapshot) []proc.Stat {
	member := map[int]bool{}
	live := marks.Live(f.mark) // a process caught in an exec is read again
	for _, st := range s.ByPID {
		if _, ok := live[st.PID]; ok && !st.Dead() {
			member[st.PID] = true
		}
	}
	for grew := true; grew; {
		grew = false
		for _, st := range s.ByPID {
			if !st.Dead() && !member[st.PID] && member[st.PPID] {
				member[st.PID], grew = true, true
			}
		}
	}
	var out []proc.Stat
	for pid := range member {
		out = append(out, s.ByPID[pid])
	}
	return out
}

// fates is what a teardown recorded, by process.
type fates struct {
	mu sync.Mutex
	of map[proc.Ident][]record.Fate
}

func (f *fates) note(id proc.Ident, fate record.Fate, _ time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.of[id] = append(f.of[id], fate)
}

func (f *fates) get(id proc.Ident) []record.Fate {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.of[id]
}

// lineage is one test's marked children and the teardown over them.
type lineage struct {
	t     *testing.T
	mark  string
	fates *fates
}

func newLineage(t *testing.T) *lineage {
	l := &lineage{t: t, mark: marks.New(), fates: &fates{of: map[proc.Ident][]record.Fate{}}}
	t.Cleanup(func() { marks.Kill(l.mark) })
	return l
}

// start runs sh -c script as a marked child of the test, reaped as soon as
// it exits, and returns its identity.
func (l *lineage) start(script string) proc.Ident {
	l.t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = append(os.Environ(), marks.Env+"="+l.mark)
	if err := cmd.Start(); err != nil {
		l.t.Fatal(err)
	}
	go cmd.Wait()
	st, err := proc.ReadStat(cmd.Process.Pid)
	if err != nil {
		l.t.Fatal(err)
	}
	return st.Ident
}

// teardown is a Teardown of the lineage alone: no group, no cgroup.
func (l *lineage) teardown(grace, survivorWait time.Duration) *Teardown {
	return &Teardown{Tracker: &fakeTracker{mark: l.mark}, Grace: grace, SurvivorWait: survivorWait,
		Log: zerolog.New(zerolog.NewTestWriter(l.t)), Fate: l.fates.note}
}

// until waits, bounded, for cond about id to hold.
func (l *lineage) until(id proc.Ident, what string, cond func(proc.Ident) bool) {
	l.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(id); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			l.t.Fatalf("%v never %s", id, what)
		}
	}
}

// sigMask reports whether pid's status line field (SigIgn, SigCgt) has sig.
func sigMask(pid int, field string, sig syscall.Signal) bool {
	b, err := proc.ReadFile(pid, "status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			m, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && m&(1<<(sig-1)) != 0
		}
	}
	return false
}

func catchesTERM(id proc.Ident) bool { return sigMask(id.PID, "SigCgt", syscall.SIGTERM) }

// sleeping waits until id has exec'd sleep and its environment shows its
// marker again: mid-exec, the kernel shows an empty one.
func (l *lineage) sleeping(id proc.Ident) {
	l.t.Helper()
	l.until(id, "exec'd sleep", func(id proc.Ident) bool {
		c, _ := proc.ReadFile(id.PID, "comm")
		return string(c) == "sleep\n" && marks.Carries(id.PID, l.mark)
	})
}

// wantFate fails unless id's only recorded fate is want.
func (l *lineage) wantFate(id proc.Ident, want record.Fate) {
	l.t.Helper()
	if got := l.fates.get(id); len(got) != 1 || got[0] != want {
		l.t.Errorf("%v: fates %v, want [%s]", id, got, want)
	}
}

// wantNoneLeft fails when a marked process outlived the teardown.
func (l *lineage) wantNoneLeft() {
	l.t.Helper()
	if left := marks.Live(l.mark); len(left) > 0 {
		l.t.Errorf("alive after the teardown: %v", left)
	}
}

// TestTermWithinGrace: a member that dies of its TERM ends the grace at
// once, with fate term and nothing KILLed.
func TestTermWithinGrace(t *testing.T) {
	t.Parallel()
	l := newLineage(t)
	id := l.start("exec sleep 60")
	l.sleeping(id)
	grace := 10 * time.Second
	out := l.teardown(grace, 5*time.Second).Run()
	if out.Termed != 1 || out.Killed != 0 || out.Ended != 1 || len(out.Survivors) != 0 {
		t.Errorf("outcome %+v, want 1 termed, none killed, 1 ended, no survivors", out)
	}
	if d := out.End.Sub(out.Start); d >= grace {
		t.Errorf("teardown took %v: the grace was not cut short when the live set emptied", d)
	}
	l.wantFate(id, record.FateTerm)
	l.wantNoneLeft()
}

// TestKillAfterGrace: a member that ignores TERM is KILLed once the grace
// has run out, with fate kill, and counted in Killed.
func TestKillAfterGrace(t *testing.T) {
	t.Parallel()
	l := newLineage(t)
	id := l.start(`trap "" TERM; exec sleep 60`)
	l.sleeping(id)
	if !sigMask(id.PID, "SigIgn", syscall.SIGTERM) {
		t.Fatalf("%v does not ignore TERM", id)
	}
	grace := 300 * time.Millisecond
	out := l.teardown(grace, 5*time.Second).Run()
	if out.Termed != 1 || out.Killed != 1 || out.Ended != 1 || len(out.Survivors) != 0 {
		t.Errorf("outcome %+v, want 1 termed, 1 killed, 1 ended, no survivors", out)
	}
	if d := out.End.Sub(out.Start); d < grace {
		t.Errorf("teardown took %v, less than the %v grace", d, grace)
	}
	l.wantFate(id, record.FateKill)
	l.wantNoneLeft()
}

// TestNewbornInGrace: a member whose TERM handler starts a helper and
// exits leaves a newborn the grace waits on (it is not sent TERM: it is
// the cleanup the grace exists for) and the KILL pass ends. The handler
// outlives its helper's birth by 200 ms: a helper born while a walk runs
// and a parent gone before it ends is for the tracker's kernel account to
// catch (see quiet), which this fake has none of.
func TestNewbornInGrace(t *testing.T) {
	t.Parallel()
	l := newLineage(t)
	// The newborn is a subshell that execs nothing: the fake tracker knows
	// members by the mark in their environment, which reads empty while a
	// process execs, and a loaded host can keep a newborn in its exec past
	// its parent's exit (a real tracker has it from its birth).
	parent := l.start(`trap "(while :; do sleep 0.05; done) & sleep 0.2; exit 0" TERM; while :; do sleep 0.05; done`)
	l.until(parent, "caught TERM", catchesTERM)
	before := marks.Live(l.mark)
	grace := 500 * time.Millisecond
	out := l.teardown(grace, 5*time.Second).Run()
	if d := out.End.Sub(out.Start); d < grace {
		t.Errorf("teardown took %v, less than the %v grace: the newborn was not waited on", d, grace)
	}
	l.wantFate(parent, record.FateTerm)
	newborns := 0
	l.fates.mu.Lock()
	for id, fs := range l.fates.of {
		if _, ok := before[id.PID]; !ok && len(fs) == 1 && fs[0] == record.FateKill {
			newborns++
		}
	}
	l.fates.mu.Unlock()
	if newborns == 0 || out.Killed == 0 {
		t.Errorf("no newborn of the grace was KILLed (outcome %+v, fates %v)", out, l.fates.of)
	}
	l.wantNoneLeft()
}

// TestStoppedGetsCont: a stopped member is sent CONT with its TERM, so it
// runs its TERM handler within the grace (stopped, it would sit the grace
// out and be KILLed).
func TestStoppedGetsCont(t *testing.T) {
	t.Parallel()
	l := newLineage(t)
	id := l.start(`trap "exit 0" TERM; while :; do sleep 0.05; done`)
	l.until(id, "caught TERM", catchesTERM)
	if err := proc.Signal(id, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	l.until(id, "stopped", func(id proc.Ident) bool { st, ok := proc.LiveStat(id); return ok && st.State == 'T' })
	grace := 10 * time.Second
	out := l.teardown(grace, 5*time.Second).Run()
	if d := out.End.Sub(out.Start); d >= grace {
		t.Errorf("teardown took %v: the stopped member sat out the grace", d)
	}
	l.wantFate(id, record.FateTerm)
	l.wantNoneLeft()
}

// TestDeniedByAuthority: with another uid's authority, a root-owned member
// is refused by the kernel: reported in Denied and Survivors, never
// signalled (it is still alive), its fate survivor.
func TestDeniedByAuthority(t *testing.T) {
	testenv.NeedRoot(t, "acting with another uid's authority")
	t.Parallel()
	l := newLineage(t)
	id := l.start("exec sleep 60")
	l.sleeping(id)
	as, err := proc.As(65534)
	if err != nil {
		t.Fatal(err)
	}
	defer as.Close()
	td := l.teardown(200*time.Millisecond, time.Second)
	td.As = as
	out := td.Run()
	if len(out.Denied) != 1 || out.Denied[0].Ident != id {
		t.Errorf("denied %v, want only %v", out.Denied, id)
	}
	if len(out.Survivors) != 1 || out.Survivors[0].Ident != id {
		t.Errorf("survivors %v, want only %v", out.Survivors, id)
	}
	if out.Termed != 0 || out.Killed != 0 {
		t.Errorf("outcome %+v: a denied process counted as signalled", out)
	}
	if !proc.Alive(id) {
		t.Errorf("%v is dead: a denied process was signalled", id)
	}
	l.wantFate(id, record.FateSurvivor)
}
