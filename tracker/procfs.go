// procfs.go owns the procfs backend: the hold makes itself a child
// subreaper, so every orphan of the payload reparents to it instead of to
// init, and walks /proc for its descendants. It keeps the union of every
// process it has seen, by (pid, start time), reaps the orphans it adopted
// (never the payload, whose status belongs to os/exec) and records their
// exits from the reap, reads any other zombie's status from its stat, and
// turns what its walks see into lineage events.
package tracker

import (
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/record"
)

// While the payload runs, the procfs backend walks /proc every
// procWalkInterval to record processes (teardown walks on its own), but
// using at most 1/procWalkShare of a core: a host with many processes is
// walked less often rather than costing the hold a core.
const (
	procWalkInterval = 250 * time.Millisecond
	procWalkShare    = 20 // interval >= 20 x the last walk's CPU time (5% of a core)
	reapInterval     = 20 * time.Millisecond
)

type procTracker struct {
	noCaps     // only the kernel keeps a lineage tracked after its holder dies: no pins
	opts       Options
	bootToWall time.Duration // turns start times since boot into wall time
	self       int
	ptrace     bool // CAP_SYS_PTRACE: every zombie's stat shows its exit status

	mu sync.Mutex
	// reaping is held (shared) by each reap of the hold's and (alone) by a
	// read of the hold's children lists: see children.
	reaping sync.RWMutex
	root    proc.Ident
	seen    map[proc.Ident]*procMember // every member ever seen
	byPID   map[int]proc.Ident         // live members' pids -> identity
	sealed  bool                       // Seal has run: quiet is closed
	count   record.Counters

	stop  chan struct{}
	done  chan struct{}
	quiet chan struct{} // closed by Seal: the teardown's walks take over
	sigc  chan os.Signal
}

type procMember struct {
	stat proc.Stat
	dead bool
	exec *record.Event // an exec seen before its argv was in place (procfs_exec.go)
	// stack is the program's stack start last read as set (procfs_exec.go):
	// 0 until one is read after an exec.
	stack uint64
}

func newProcTracker(opts Options) (*procTracker, error) {
	primeGoPidfdCheck()
	caps, _ := EffectiveCaps()
	return &procTracker{
		ptrace:     caps.Ptrace,
		bootToWall: proc.BootToWall(),
		opts:       opts,
		self:       os.Getpid(),
		seen:       make(map[proc.Ident]*procMember),
		byPID:      make(map[int]proc.Ident),
	}, nil
}

func (t *procTracker) Backend() string { return BackendProc }

// Prepare makes the hold a child subreaper before the payload exists, so no
// orphan can slip past it to init.
func (t *procTracker) Prepare(cmd *exec.Cmd) error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return &ProbeError{Backend: BackendProc, Reason: "prctl(PR_SET_CHILD_SUBREAPER) failed: " + err.Error()}
	}
	return nil
}

// Started records the payload and starts the background walker and reaper.
func (t *procTracker) Started(root proc.Ident) error {
	t.mu.Lock()
	t.root = root
	t.mu.Unlock()
	t.stop = make(chan struct{})
	t.done = make(chan struct{})
	t.quiet = make(chan struct{})
	t.sigc = make(chan os.Signal, 1)
	signal.Notify(t.sigc, syscall.SIGCHLD)
	// The payload is recorded now from its own stat; the walks that find
	// its descendants start with the loop.
	if st, err := proc.ReadStat(root.PID); err == nil && st.Start == root.Start {
		t.mu.Lock()
		t.observe(st, time.Now())
		t.mu.Unlock()
	}
	go t.loop()
	return nil
}

// loop walks /proc at an interval and whenever a child changes state
// (SIGCHLD: an adopted orphan may need reaping).
func (t *procTracker) loop() {
	defer close(t.done)
	timer := time.NewTimer(procWalkInterval)
	defer timer.Stop()
	// Reaping is coalesced: a storm of orphans dying (a 10,000-process tree
	// killed at once) costs one scan of the children per reapInterval, not
	// one per SIGCHLD.
	reapTimer := time.NewTimer(0)
	defer reapTimer.Stop()
	reapArmed := true
	for {
		select {
		case <-t.stop:
			return
		case <-t.quiet:
			return
		case <-timer.C:
		case <-t.sigc:
			// A child changed state: reap adopted orphans soon, without a walk.
			if !reapArmed {
				reapTimer.Reset(reapInterval)
				reapArmed = true
			}
			continue
		case <-reapTimer.C:
			reapArmed = false
			t.reapAdopted()
			continue
		}
		timer.Reset(walkDelay(cpuCost(func() { t.Live() })))
	}
}

// walkDelay is the wait before the next walk, given the last one's CPU time.
func walkDelay(cpu time.Duration) time.Duration {
	return max(procWalkInterval, procWalkShare*cpu)
}

// cpuCost runs fn and returns the CPU time the hold used meanwhile. It is
// CPU, not wall time, that the walks' share bounds: a walk slowed by a
// payload busy building 10,000 processes took 0.8 s of wall time for 40 ms
// of CPU, and waiting 20 x its wall time left the lineage unwalked for 16 s.
func cpuCost(fn func()) time.Duration {
	before := holdCPU()
	fn()
	return holdCPU() - before
}

// holdCPU is the CPU time (user and system) the hold has used so far.
func holdCPU() time.Duration {
	u := record.SelfUsage()
	if u == nil {
		return 0
	}
	return time.Duration((u.UserMS + u.SysMS) * float64(time.Millisecond))
}

// Live looks once: the descendants of the hold, plus every member seen
// before that is still alive, minus zombies. Adopted zombies are reaped.
func (t *procTracker) Live() ([]proc.Stat, error) {
	s, err := t.below()
	if err != nil {
		if s, err = proc.TakeSnapshot(); err != nil {
			return nil, err
		}
	}
	return t.LiveIn(s), nil
}

// below reads the processes below the hold from the kernel's lists of
// children: every member is there (orphans come to the hold), and the read
// costs the lineage, not the host. What one read misses (a list read while
// a child of it was reaped) the next finds, and Account, which cannot miss
// a live member, says when nothing is left. A lineage that is most of the
// host is walked instead (errLineageLarge).
func (t *procTracker) below() (*proc.Snapshot, error) {
	if t.lineageThreads()*2 > hostTasks() {
		return nil, errLineageLarge
	}
	top, err := t.children()
	if err != nil {
		return nil, err
	}
	return proc.SnapshotFrom(top), nil
}

// snapshot is below, or a walk (false) when below cannot answer.
func (t *procTracker) snapshot() (*proc.Snapshot, bool) {
	s, err := t.below()
	return s, err == nil
}

// errLineageLarge is below's answer for a lineage with more than half the
// host's threads: the descent reads one list per thread, a walk of /proc
// one stat per process.
var errLineageLarge = errors.New("the lineage has more than half the host's threads: walking /proc costs less than reading its children lists")

// lineageThreads counts the threads of the live members, as last seen.
func (t *procTracker) lineageThreads() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, id := range t.byPID {
		n += max(t.seen[id].stat.Threads, 1)
	}
	return n
}

// children reads the hold's own children lists with no reap of the hold's
// under way: a reap racing the read could make it skip a live child.
func (t *procTracker) children() ([]int, error) {
	t.reaping.Lock()
	defer t.reaping.Unlock()
	return proc.Children(t.self)
}

// LiveIn is Live over the caller's walk, plus the hold's children it did
// not list. Those are looked up last, after the reaps, so that a teardown
// signals what they hold at once.
func (t *procTracker) LiveIn(s *proc.Snapshot) []proc.Stat {
	live, reap := t.members(s)
	t.reapAll(reap, min(runtime.GOMAXPROCS(0), len(reap)/parallelReap+1))
	return append(live, t.unlisted(s)...)
}

// unlisted returns the live children of the hold that walk s did not list
// (born after it listed /proc), and reaps the zombies among them. A process
// that forks and exits in a loop is never in a walk, but one of its
// generations is always among the hold's children.
func (t *procTracker) unlisted(s *proc.Snapshot) (live []proc.Stat) {
	t.adopted(func(pid int) {
		if _, listed := s.ByPID[pid]; listed {
			return
		}
		st, err := proc.ReadStat(pid)
		switch {
		case err != nil || st.PPID != t.self:
		case st.Dead():
			t.reapZombie(st)
		default:
			live = append(live, st)
			t.mu.Lock()
			t.observe(st, time.Now())
			t.mu.Unlock()
		}
	})
	return live
}

// parallelReap is the zombie count from which a walk reaps on several
// goroutines. Most of a reap is the kernel freeing the process and the
// /proc entries the walks made for it, much of that outside any lock, and
// the CPUs are idle once a killed tree is all zombies: 10,000 reaps took
// 105-160 ms on one goroutine, and the walk with its reaps 208-249 ms
// against 170-195 ms on two.
const parallelReap = 1024

// reapAll reaps the adopted zombies in reap on up to workers goroutines.
func (t *procTracker) reapAll(reap []proc.Stat, workers int) {
	proc.InParts(len(reap), workers, func(_, lo, hi int) {
		for _, st := range reap[lo:hi] {
			t.reapZombie(st)
		}
	})
}

// members finds the live members in s and the adopted zombies to reap.
// Every other zombie below the hold has its exit recorded from its own
// stat; an adopted one's is recorded when the hold reaps it, from the
// exact status the reap returns.
func (t *procTracker) members(s *proc.Snapshot) (live []proc.Stat, reap []proc.Stat) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	// Everything below the hold is the payload's: the hold starts nothing
	// else, and orphans come to it.
	found := make(map[proc.Ident]bool, len(t.byPID)+16)
	s.Descend([]int{t.self}, func(st proc.Stat) bool {
		if st.Dead() {
			if st.PPID == t.self && st.PID != t.root.PID {
				found[st.Ident] = true // its exit is recorded by its reap (LiveIn)
				reap = append(reap, st)
				return true
			}
			// A zombie stays until its parent reaps it: its status is read
			// (and, for a hold without CAP_SYS_PTRACE, its ids) only the
			// first time a walk finds it dead.
			if m, ok := t.seen[st.Ident]; !ok || !m.dead {
				t.zombie(st, t.statusOf(st), now)
			}
			return true
		}
		found[st.Ident] = true
		live = append(live, st)
		t.observe(st, now)
		return true
	})
	// Members seen before but no longer below the hold (they cannot get out
	// from under a subreaper, but the union is what the design promises),
	// or that a read of the children lists missed: read on their own before
	// their exit is recorded, unless s is a walk of every process.
	for _, id := range t.byPID {
		if found[id] {
			continue
		}
		st, ok := s.Get(id)
		if !ok && !s.Whole {
			st, ok = proc.LiveStat(id)
		}
		if ok {
			live = append(live, st)
			continue
		}
		t.exited(id, t.seen[id], now, nil)
	}
	return live, reap
}

// statusOf is a zombie's wait status as its stat gives it; nil when it
// gives none, or when the kernel hid it from the hold (it then shows 0: a
// hold without CAP_SYS_PTRACE is shown the status only of a zombie whose
// ids are all its own, not that of a setuid program's).
func (t *procTracker) statusOf(st proc.Stat) *unix.WaitStatus {
	if st.State != 'Z' || st.Status < 0 || !t.ptrace && !proc.OwnIDs(st.PID) {
		return nil
	}
	ws := unix.WaitStatus(st.Status)
	return &ws
}

// zombie records the end of the dead member st with status ws (nil:
// unknown). One never seen alive was born and died between two walks: this
// is all procfs ever sees of it, and if the hold adopted it, its real
// parent is unknown.
func (t *procTracker) zombie(st proc.Stat, ws *unix.WaitStatus, now time.Time) {
	m, ok := t.seen[st.Ident]
	if !ok {
		m = &procMember{stat: st}
		t.seen[st.Ident] = m
		t.count.Members++
		ppid := st.PPID
		if ppid == t.self {
			ppid = 0
		}
		t.emit(record.Event{Kind: record.Fork, Time: st.Ident.Started(t.bootToWall), Ident: st.Ident, PPID: ppid, PGID: st.PGID, SID: st.SID})
	}
	t.exited(st.Ident, m, now, ws)
}

// observe notes a live member: a new one is a fork (and its program an
// exec); a known one may have exec'd since (execChanged).
func (t *procTracker) observe(st proc.Stat, now time.Time) {
	m, ok := t.seen[st.Ident]
	if !ok {
		m = &procMember{stat: st, stack: st.StartStack}
		t.seen[st.Ident] = m
		t.byPID[st.PID] = st.Ident
		t.count.Members++
		// An orphan found already adopted by the hold has an unknown real
		// parent: say nothing rather than name the subreaper.
		ppid := st.PPID
		if ppid == t.self && st.PID != t.root.PID {
			ppid = 0
		}
		// The fork's time is the process's own start time (to the tick),
		// not when this walk happened to notice it.
		t.emit(record.Event{Kind: record.Fork, Time: st.Ident.Started(t.bootToWall), Ident: st.Ident, PPID: ppid, PGID: st.PGID, SID: st.SID, UID: uidOf(st.PID)})
		t.execSeen(m, &st, st.Ident.Started(t.bootToWall)) // its program, as far as procfs can tell, since birth
		m.stat = st
		return
	}
	t.execChanged(m, &st, now)
	if m.stat.PGID != st.PGID || m.stat.SID != st.SID || m.stat.PPID != st.PPID {
		t.emit(record.Event{Kind: record.Regroup, Time: now, Ident: st.Ident, PPID: st.PPID, PGID: st.PGID, SID: st.SID})
	}
	m.stat = st
}

// exited records a member's exit; status is nil when procfs cannot know it.
func (t *procTracker) exited(id proc.Ident, m *procMember, now time.Time, status *unix.WaitStatus) {
	if m.dead {
		return
	}
	m.dead = true
	t.flushExec(m)
	if t.byPID[id.PID] == id {
		delete(t.byPID, id.PID)
	}
	ev := record.Event{Kind: record.Exit, Time: now, Ident: id}
	if status != nil {
		setExitStatus(&ev, *status)
	}
	t.emit(ev)
}

// reapAdopted reaps the zombies among the hold's own children (the
// orphans it adopted), reading only its children lists.
func (t *procTracker) reapAdopted() {
	t.adopted(func(pid int) {
		// One peek per child: a live one costs nothing more.
		if _, exited, _ := proc.PeekExit(pid, false); exited {
			t.reap(pid)
		}
	})
}

// adopted calls fn with each child of the hold but the payload's own
// process (os/exec's), alive or a zombie, from the kernel's children lists
// of the hold's threads.
func (t *procTracker) adopted(fn func(pid int)) {
	kids, _ := t.children()
	for _, pid := range kids {
		if pid != t.root.PID {
			fn(pid)
		}
	}
}

// Account says whether the hold has a child left besides the payload's
// own process, alive or a zombie not yet reaped, or the payload's process
// is alive. Every live member is below the hold (orphans come to it), so
// some live member has a live ancestor among the hold's children; and a
// process that forks and exits in a loop always has one of its own there:
// its newborn is handed to the hold before it becomes a zombie. The lists
// are read with no reap of the hold's under way (children), so an empty
// read is an empty list; the payload is looked at first, as its orphans
// come to the hold before it is a zombie. Not known on a kernel that keeps
// no children lists.
func (t *procTracker) account() (some, known bool, err error) {
	if proc.Alive(t.root) {
		return true, true, nil
	}
	kids, kerr := t.children()
	if kerr != nil {
		return false, false, nil
	}
	return slices.ContainsFunc(kids, func(pid int) bool { return pid != t.root.PID }), true, nil
}

// reap collects an adopted orphan's zombie (never the payload's: os/exec
// owns that) and records its exit status, which procfs learns only here.
func (t *procTracker) reap(pid int) {
	// Only our own zombie is reaped: its stat (read while it is a zombie,
	// so the pid cannot be reused meanwhile) gives its identity.
	if st, err := proc.ReadStat(pid); err == nil && st.Dead() {
		t.reapZombie(st)
	}
}

// reapZombie reaps our zombie child st, whose stat was read while it was a
// zombie, and records its exit with the exact status the reap returns:
// only this process reaps its children, so the pid still names it (the
// background reaper stops at Seal; before that, a reuse would need the pid
// space to wrap around between a walk and this call). A reap that fails
// lost the race to another of the hold's reaps, which records the exit.
func (t *procTracker) reapZombie(st proc.Stat) {
	pid := st.PID
	var ws unix.WaitStatus
	t.reaping.RLock()
	got, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil)
	t.reaping.RUnlock()
	if err != nil || got != pid {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.zombie(st, &ws, time.Now())
}

func (t *procTracker) emit(ev record.Event) {
	if t.opts.Sink != nil {
		t.opts.Sink(ev)
	}
}

// Changed is nil: procfs cannot see births as they happen; callers rescan.
func (t *procTracker) Changed() <-chan struct{} { return nil }

// Seal notes the instant; procfs cannot stop forks, so the caller's KILL
// passes repeat until nothing is left. It also stops the background walks
// and reaping: each KILL pass walks (LiveIn reaps what it finds), and a
// reaper racing the kernel for the CPUs while a 10,000-process cgroup dies
// only slows the dying. The hold must reap what it adopted before it
// exits: a subreaper that exits with 10,000 zombie children in another
// process group of its session costs the kernel a check of that whole
// group per child, under tasklist_lock (5 s measured).
func (t *procTracker) Seal() error {
	t.mu.Lock()
	first := !t.sealed
	t.sealed = true
	t.mu.Unlock()
	if first && t.quiet != nil {
		close(t.quiet)
	}
	return nil
}

func (t *procTracker) Counters() record.Counters {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.count
}

// Close stops the walker; one last walk records late exits and reaps.
// sealMode: nothing stops a fork; KILL passes repeat until it is empty.
func (t *procTracker) sealMode() string { return SealPasses }

// finish is Close: nothing of procfs's is slow to free.
func (t *procTracker) finish() error { return t.Close() }

func (t *procTracker) Close() error {
	if t.stop != nil {
		close(t.stop)
		<-t.done
		signal.Stop(t.sigc)
		t.stop = nil
		t.reapAdopted()
		t.settleExits()
	}
	return nil
}

// settleExits records the exit of every member known alive that is gone
// now, reading only the members' own stat (no walk), and the execs still
// held back of those alive.
func (t *procTracker) settleExits() {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	for _, id := range t.byPID {
		if st, err := proc.ReadStat(id.PID); err == nil && st.Start == id.Start && !st.Dead() {
			t.lastExec(t.seen[id], st)
			continue
		}
		t.exited(id, t.seen[id], now, nil)
	}
}
