// Package teardown ends one payload's lineage: the tracked lineage, its
// process group and its cgroup, TERM first, then KILL, with what will not
// die recorded as a survivor.
// teardown.go owns the teardown engine: the union of the tracked lineage,
// the payload's process group and its cgroup is ended TERM first, then,
// after a grace that waits on the live set, sealed and KILLed until a walk
// finds nothing and the kernel's accounts (the cgroup, the tracker's) agree;
// what will not die within a bound is recorded as a survivor. Everything is
// signalled through pidfds opened after the start time was checked.
package teardown

import (
	"os"
	"sort"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/gpu-hold/gpu-hold/internal/cgroup"
	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/record"
	"github.com/gpu-hold/gpu-hold/tracker"
)

// rescanInterval is how often a tracker that cannot report births as they
// happen (procfs) is rescanned while teardown waits. Exits still wake the
// wait at once through pidfds.
const rescanInterval = 50 * time.Millisecond

// chaseInterval is the pause between KILL passes while a walk finds nothing
// alive but the kernel's accounts name something (see quiet).
const chaseInterval = 5 * time.Millisecond

// emptyWait bounds one wait for the cgroup to empty after its cgroup.kill.
// cgroup.kill sends each process's main thread a KILL that only that thread
// acts on, so a process whose main thread has exited while other threads
// run is not ended by it: the kernel leaves the KILL pending on the exited
// thread. Such a process is KILLed through its pidfd beside the write when
// a walk has seen it; one no walk has seen keeps the cgroup populated, and
// after emptyWait the pass walks and KILLs what is alive through pidfds.
// 2 s is above the longest 10,000-process kill measured here (1.7 s), so a
// large tree is not walked while it dies.
const emptyWait = 2 * time.Second

// Teardown ends one lineage: the hold fills it in and calls Run once.
type Teardown struct {
	Tracker      Lineage
	PGID         int            // the payload's process group (0: none)
	Root         proc.Ident     // the payload's own process, the group's leader
	Cgroup       *cgroup.Cgroup // the payload's cgroup (nil: none)
	Grace        time.Duration
	SurvivorWait time.Duration
	Log          zerolog.Logger
	Fate         func(id proc.Ident, f record.Fate, at time.Time) // may be nil
	OnKill       func(at time.Time)                               // called when the KILL pass begins; may be nil
	// As is the authority every signal and cgroup.kill is sent with (nil:
	// this process's own): a dead holder's, when reaping its lineage.
	As *proc.Authority
	// CutGrace, when it closes, ends the grace at once and goes on to the
	// KILL passes (a second Ctrl-C, as srun and docker take it); nil: never.
	CutGrace <-chan struct{}
	// Group is the payload's group, opened through its leader's pidfd by
	// the caller at the launch (proc.OpenGroup), or nil: Run opens it
	// then. Run closes it.
	Group *proc.Group

	group *proc.Group // the payload's group (openGroup); nil: none
	// denied holds what the kernel refused to let us signal: left out of
	// the targets from then on, and reported (Outcome.Denied).
	denied   map[proc.Ident]proc.Stat
	selfPID  int
	selfPGID int
	walks    int
}

// Outcome is what a teardown did.
type Outcome struct {
	Termed    int         // processes sent TERM
	Killed    int         // processes sent KILL one by one
	Survivors []proc.Stat // alive after the survivor bound
	Start     time.Time   // teardown start
	End       time.Time   // teardown end
	Passes    int         // KILL passes it took
	Ended     int         // distinct processes signalled (TERM, KILL or both)
	// CgroupKilled: the cgroup was killed whole (cgroup.kill), which ends
	// its members without counting them in Killed.
	CgroupKilled bool
	// Denied are the processes still alive that the kernel would not let
	// the teardown's authority signal.
	Denied []proc.Stat
	// Walks counts the passes that read every process in /proc, where no
	// kernel list (the tracker's, the group's) could answer: the part of
	// a teardown that grows with the host.
	Walks int
}

// targets is the union to end, now: live lineage members, live members of
// the payload's group, live members of the cgroup; never the hold itself
// or its own group. One walk of /proc serves all three.
func (td *Teardown) targets() map[proc.Ident]proc.Stat {
	set := make(map[proc.Ident]proc.Stat)
	add := func(st proc.Stat) {
		if st.PID == td.selfPID || st.Dead() {
			return
		}
		if _, ok := td.denied[st.Ident]; ok {
			return
		}
		set[st.Ident] = st
	}
	snap, err := td.snapshot()
	if err != nil {
		td.Log.Warn().Err(err).Msg("cannot walk /proc; ending what the tracker and cgroup name")
	}
	if td.Tracker != nil {
		for _, st := range td.Tracker.LiveIn(snap) {
			add(st)
		}
	}
	if td.PGID > 0 && td.PGID != td.selfPGID && td.groupIsOurs(snap) {
		for _, st := range snap.ByPID {
			if st.PGID == td.PGID {
				add(st)
			}
		}
	}
	if td.Cgroup != nil {
		// A member the look at /proc did not list (it joined the cgroup
		// after it) is read on its own.
		for _, pid := range td.Cgroup.PIDs() {
			if st, ok := snap.ByPID[pid]; ok {
				add(st)
			} else if st, err := proc.ReadStat(pid); err == nil {
				add(st)
			}
		}
	}
	return set
}

// snapshot is what a pass looks at: where the tracker finds its members
// without a walk (eBPF reads them one by one in LiveIn; procfs descends the
// kernel's lists of the hold's children) and the kernel lists the
// payload's group, those, the group, the cgroup's members and the group's
// leader; otherwise every process in /proc. The union is the same; on a
// host of tens of thousands of processes the walk is not.
func (td *Teardown) snapshot() (*proc.Snapshot, error) {
	if td.Tracker == nil {
		return td.walk()
	}
	var group []int
	if td.PGID > 0 && td.PGID != td.selfPGID {
		pids, err := tracker.GroupMembers(td.PGID)
		if err != nil {
			return td.walk() // before reading the lineage, which the walk reads too
		}
		group = append(pids, td.PGID)
	}
	s, ok := td.Tracker.Snapshot()
	if !ok {
		return td.walk()
	}
	s.Read(group)
	if td.Cgroup != nil {
		s.Read(td.Cgroup.PIDs())
	}
	return s, nil
}

// walk reads every process in /proc, and counts it (Outcome.Walks).
func (td *Teardown) walk() (*proc.Snapshot, error) {
	td.walks++
	return proc.TakeSnapshot()
}

// openGroup opens the payload's process group through its leader's pidfd,
// at the start, while the leader still holds the group's number (the
// hold's payload is not reaped before its teardown; a dead holder's may be
// gone): the group's KILL then reaches its members even after the leader
// died of its TERM. No group when there is none, it is the hold's own, or
// its leader is gone.
func (td *Teardown) openGroup() {
	g := td.Group
	if td.PGID <= 0 || td.PGID == td.selfPGID || td.PGID != td.Root.PID {
		if g != nil {
			g.Close()
		}
		return
	}
	if g == nil {
		g, _ = proc.OpenGroup(td.Root)
	}
	td.group = g
}

// killGroup sends KILL to the payload's process group through its leader's
// pidfd, and reports whether the group is ended (true too when there is no
// group, or none of it is left; false when it cannot be signalled: its
// leader was gone before teardown, or a kernel older than 6.9. targets()
// then finds the members by a walk).
func (td *Teardown) killGroup() bool {
	if td.PGID <= 0 {
		return true
	}
	if td.group == nil {
		return false
	}
	err := td.As.Do(func() error { return td.group.Signal(syscall.SIGKILL) })
	if err != nil && err != proc.ErrGone {
		td.Log.Debug().Err(err).Int("pgid", td.PGID).Msg("cannot KILL the payload's group through its leader's pidfd; walking /proc for it")
		return false
	}
	return true
}

// account is the tracker's kernel-side account of its live members (see
// tracker.Lineage.Account); not known for a tracker that keeps none.
func (td *Teardown) account() (some, known bool) {
	if td.Tracker == nil {
		return false, false
	}
	some, known, err := td.Tracker.Account()
	if err != nil {
		return false, false
	}
	return some, known
}

// noneAlive reports whether the tracker can vouch, without a walk, that no
// lineage member is alive.
func (td *Teardown) noneAlive() bool {
	some, known := td.account()
	return known && !some
}

// quiet reports whether the kernel's own accounts agree with a walk that
// found nothing alive: the cgroup is empty and the tracker's account names
// no live member. A walk alone can be outrun: a process that forks and
// exits in a loop is born after the walk lists /proc and gone before it
// reads the stat, every time.
func (td *Teardown) quiet() bool {
	if td.Cgroup != nil && !td.Cgroup.WaitEmpty(0) {
		return false
	}
	some, known := td.account()
	return !(known && some)
}

// over reports whether a KILL pass has nothing left to end: the walk found
// nothing alive, and the accounts agree.
func (td *Teardown) over(live map[proc.Ident]proc.Stat) bool {
	return len(live) == 0 && td.quiet()
}

// groupIsOurs reports whether the group number still names the payload's
// group: its leader, the payload's own process, still holds the pid (alive
// or a zombie). Once that pid is free, a new process may take it and make
// a group of the same number; that group is not ours.
func (td *Teardown) groupIsOurs(snap *proc.Snapshot) bool {
	st, ok := snap.ByPID[td.PGID]
	return ok && st.PID == td.Root.PID && st.Start == td.Root.Start
}

// run is what one Run carries from phase to phase.
type run struct {
	out     Outcome
	w       *watcher                 // nil: waits rescan on a timer
	live    map[proc.Ident]proc.Stat // the union alive, as last seen
	pending map[proc.Ident]bool      // signalled, not yet seen dead
	killed  map[proc.Ident]bool
	termed  map[proc.Ident]bool
	// owed holds every process signalled one by one that has not been
	// seen dead (a zombie, or gone): one that left the union after its
	// signal is still waited for, and KILLed (see withOwed).
	owed map[proc.Ident]bool
}

// Run performs the teardown: TERM and the grace, then the seal and the
// KILL passes, then what survived.
func (td *Teardown) Run() Outcome {
	r := &run{out: Outcome{Start: time.Now()}, pending: map[proc.Ident]bool{}, killed: map[proc.Ident]bool{}, termed: map[proc.Ident]bool{}, owed: map[proc.Ident]bool{}}
	td.selfPID = os.Getpid()
	td.selfPGID = syscall.Getpgrp()
	td.openGroup()
	defer func() {
		if td.group != nil {
			td.group.Close()
		}
	}()
	var stop func()
	r.w, stop = td.watch()
	defer stop()

	if td.Grace > 0 || td.Cgroup == nil {
		r.live = td.targets()
	}
	if td.Grace > 0 {
		td.term(r)
		// 2. Grace: wait on the live set until it is empty or the grace
		// runs out.
		r.live = td.graceWait(r)
	}
	td.seal()
	if r.live != nil && td.over(r.live) {
		// Nothing a walk or an account sees is alive. The group's KILL
		// goes all the same: the kernel resolves its members at that
		// instant (atomically against their forks), and a dead holder's
		// reaper has no account of a member that forks and exits in a
		// loop outside any cgroup. What it reached, it waits for.
		td.killGroup()
		if r.live = td.groupAlive(); len(r.live) > 0 {
			td.killPasses(r)
		}
	} else {
		td.killPasses(r)
	}
	td.survivors(r)
	return r.out
}

// watch opens the watcher the waits block on, woken by the tracker's
// changes too; the returned func closes both. Without epoll (nil watcher)
// the waits rescan on a timer.
func (td *Teardown) watch() (*watcher, func()) {
	w, err := newWatcher()
	if err != nil {
		td.Log.Warn().Err(err).Msg("epoll unavailable; teardown rescans on a timer")
	}
	stop := make(chan struct{})
	if w != nil && td.Tracker != nil {
		if err := w.follow(td.Tracker.Changed(), stop); err != nil {
			td.Log.Debug().Err(err).Msg("cannot follow tracker events; rescanning on a timer")
		}
	}
	if w != nil {
		if err := w.wakeOn(td.CutGrace, stop); err != nil {
			td.Log.Debug().Err(err).Msg("a cut grace is seen on the next rescan only")
		}
	}
	return w, func() {
		close(stop)
		if w != nil {
			w.close()
		}
	}
}

// term is phase 1: TERM to everything alive now. Members seen stopped
// (SIGSTOP, a job stopped at a terminal) are sent CONT first, before
// anything gets TERM: stopped, a member would sit out the grace without
// acting on its TERM; and a parent dying of its TERM can orphan a process
// group, whose stopped members the kernel ends with HUP before their TERM
// handlers can run. Newborns during the grace are tracked and waited on,
// but not sent TERM. (With no grace, TERM would give nothing time to act
// on it: Run goes straight to KILL.)
func (td *Teardown) term(r *run) {
	for id, st := range r.live {
		if st.State == 'T' {
			td.send(r.w, id, syscall.SIGCONT)
		}
	}
	for id := range r.live {
		if td.send(r.w, id, syscall.SIGTERM) {
			r.out.Termed++
			r.pending[id] = true
			r.termed[id] = true
			r.owed[id] = true
		}
	}
	td.Log.Info().Int("processes", r.out.Termed).Dur("grace_ms", td.Grace).Msg("TERM sent")
}

// seal is phase 3's start: seal, then KILL until the union is empty or
// the survivor bound. The seal comes first, whatever the grace left: from
// then on the eBPF lineage cannot grow and procfs's reaper has stopped, so
// the trackers' accounts can say whether something no walk found is
// alive. With no grace and a cgroup, the cgroup is killed before anything
// is walked: the kernel ends its members at once, and the walks that
// follow only look for what is outside it.
func (td *Teardown) seal() {
	if td.Tracker != nil {
		if err := td.Tracker.Seal(); err != nil {
			td.Log.Warn().Err(err).Msg("cannot seal the lineage; repeating KILL passes")
		}
	}
}

// killPasses is phase 3: KILL passes until nothing is left, the accounts
// agree, or the survivor bound runs out.
func (td *Teardown) killPasses(r *run) {
	killStart := time.Now()
	lastWalk := killStart
	if td.OnKill != nil {
		td.OnKill(killStart)
	}
	for {
		r.out.Passes++
		td.killPass(r, killStart)
		if td.over(r.live) || time.Since(killStart) > td.SurvivorWait {
			break
		}
		td.wait(r.w, r.live, td.SurvivorWait-time.Since(killStart))
		r.live = td.refresh(r, r.live, &lastWalk)
		td.settle(r.pending, r.live, r.killed)
		if td.over(r.live) {
			break
		}
	}
	if r.out.Passes > 1 {
		td.Log.Info().Int("passes", r.out.Passes).Msg("KILL passes")
	}
	switch {
	case len(r.live) > 0 || td.quiet():
	case len(td.denied) > 0:
		td.Log.Error().Dur("survivor_wait_ms", td.SurvivorWait).Int("denied", len(td.denied)).Msg("the tracker's account still names live processes: those this teardown may not signal (named above as run by another user), and perhaps others; end them by hand")
	default:
		td.Log.Error().Dur("survivor_wait_ms", td.SurvivorWait).Msg("the payload's cgroup or the tracker's account still names a live process that no walk of /proc could find (one that forks and exits in a loop): check the cgroup's cgroup.procs and end what is left by hand")
	}
}

// killPass is one KILL pass: everything known alive at its start is
// KILLed, by cgroup.kill (atomic against forks racing it) or its pidfd.
func (td *Teardown) killPass(r *run, killStart time.Time) {
	td.markKilled(r)
	if td.Cgroup != nil {
		td.killCgroup(r, killStart)
	} else {
		// The kernel resolves the group's members at the instant
		// of the KILL: a walk can miss a member that forks and
		// exits in a loop, and no subreaper holds it for a hold
		// that is reaping a dead holder's lineage.
		td.killGroup()
	}
	for id := range r.live {
		td.send(r.w, id, syscall.SIGKILL)
	}
}

// killCgroup is a pass's cgroup.kill, then the group's KILL, and the live
// set left outside both.
func (td *Teardown) killCgroup(r *run, killStart time.Time) {
	for id, st := range r.live {
		if st.State == 'Z' { // alive, its main thread gone: see emptyWait
			td.send(r.w, id, syscall.SIGKILL)
		}
	}
	if err := td.As.Do(td.Cgroup.Kill); err != nil {
		td.Log.Warn().Err(err).Str("cgroup", td.Cgroup.Path).Msg("cgroup.kill failed")
	} else {
		r.out.CgroupKilled = true
	}
	// The group is sent KILL once the cgroup is empty: its
	// members inside are zombies by then, and signalling
	// 10,000 dying processes twice costs the kernel's time.
	empty := td.Cgroup.WaitEmpty(min(emptyWait, td.SurvivorWait-time.Since(killStart)))
	groupKilled := td.killGroup()
	if empty && groupKilled && td.noneAlive() && r.live != nil {
		// The cgroup is empty, the kernel resolved the group's
		// members for the KILL, and the tracker's kernel account
		// says no lineage member lives outside both: no walk of
		// /proc. What an earlier walk saw outside the cgroup (a
		// process that joined the payload's group) dies of the
		// group's KILL a moment later, and is waited for, as is
		// what the KILL reached that no walk saw.
		r.live = stillAlive(r.live)
		for id, st := range td.groupAlive() {
			r.live[id] = st
		}
	} else {
		r.live = td.targets() // what is left is outside the cgroup
	}
	r.live = td.withOwed(r, r.live)
	td.markKilled(r)
}

// stillAlive keeps the members of live that are still alive, read again
// by pid and start time.
func stillAlive(live map[proc.Ident]proc.Stat) map[proc.Ident]proc.Stat {
	out := make(map[proc.Ident]proc.Stat)
	for id := range live {
		if st, err := proc.ReadStat(id.PID); err == nil && st.Start == id.Start && !st.Dead() {
			out[id] = st
		}
	}
	return out
}

// markKilled counts and notes as KILLed every live member not KILLed yet.
func (td *Teardown) markKilled(r *run) {
	for id := range r.live {
		if !r.killed[id] {
			r.killed[id] = true
			r.out.Killed++
			r.pending[id] = true
			r.owed[id] = true
			td.note(id, record.FateKill)
		}
	}
}

// survivors is phase 4: what is still alive after the survivor bound, and
// what the kernel would not let the teardown signal, is on record as a
// survivor; never a token released while it runs unreported.
func (td *Teardown) survivors(r *run) {
	td.settle(r.pending, r.live, r.killed)
	for _, st := range r.live {
		r.out.Survivors = append(r.out.Survivors, st)
		td.note(st.Ident, record.FateSurvivor)
	}
	for id := range r.termed {
		r.killed[id] = true // killed now holds every process signalled
	}
	for id, st := range td.denied {
		if proc.Alive(id) {
			// Reported as a survivor too: never a token released while it
			// runs unreported.
			r.out.Denied = append(r.out.Denied, st)
			r.out.Survivors = append(r.out.Survivors, st)
			td.note(id, record.FateSurvivor)
		}
	}
	r.out.Ended = len(r.killed)
	r.out.Walks = td.walks
	sort.Slice(r.out.Survivors, func(i, j int) bool { return r.out.Survivors[i].PID < r.out.Survivors[j].PID })
	r.out.End = time.Now()
}

// graceWait waits, event-driven, until the live set is empty or the grace
// runs out, and returns what is still alive. Exits arrive through pidfds;
// the full union is recomputed when the pidfds say everything is gone (to
// find newborns before concluding), and at most every rescanInterval
// otherwise, so a large tree dying one by one does not cost a walk per exit.
func (td *Teardown) graceWait(r *run) map[proc.Ident]proc.Stat {
	graceEnd := time.Now().Add(td.Grace)
	live := r.live
	td.settle(r.pending, live, r.killed)
	lastWalk := time.Now()
	for len(live) > 0 && time.Now().Before(graceEnd) && !td.graceCut(len(live), graceEnd) {
		td.wait(r.w, live, time.Until(graceEnd))
		live = td.refresh(r, live, &lastWalk)
		td.settle(r.pending, live, r.killed)
	}
	return live
}

// graceCut reports (and logs once) that CutGrace has closed.
func (td *Teardown) graceCut(live int, graceEnd time.Time) bool {
	select {
	case <-td.CutGrace:
		td.Log.Warn().Int("alive", live).Dur("grace_left_ms", time.Until(graceEnd)).Msg("grace cut short: KILL now")
		return true
	default:
		return false
	}
}

// polls reports whether waiting must also wake on a timer to find
// newborns: the tracker cannot report births (procfs), or the watcher
// cannot hold a pidfd for every member.
func (td *Teardown) polls(w *watcher) bool {
	return td.Tracker == nil || td.Tracker.Changed() == nil || w == nil || w.full()
}

// refresh is the live set after a wait. Exits come from the pidfds; the
// union is walked again only when they say it is empty (to find newborns
// and outsiders before concluding), and otherwise at most every
// rescanInterval: when the tracker reported a change, or on the timer for a
// tracker that cannot report births. Never once per exit.
func (td *Teardown) refresh(r *run, live map[proc.Ident]proc.Stat, lastWalk *time.Time) map[proc.Ident]proc.Stat {
	w := r.w
	if w != nil && !w.full() {
		live = w.stillAlive(live)
	}
	due := time.Since(*lastWalk) >= rescanInterval
	if len(live) == 0 || due && (td.polls(w) || w.takeChanged()) {
		live = td.targets()
		*lastWalk = time.Now()
	}
	return td.withOwed(r, live)
}

// send signals id through a verified pidfd (watched when possible), with
// the teardown's authority. A refusal puts id among the denied.
func (td *Teardown) send(w *watcher, id proc.Ident, sig syscall.Signal) bool {
	var err error
	if w != nil {
		err = w.signal(id, sig, td.As)
	} else if h, oerr := proc.Open(id); oerr != nil {
		err = oerr
	} else {
		err = td.As.Signal(h, sig)
		h.Close()
	}
	if proc.Denied(err) {
		td.deny(id)
	}
	return err == nil
}

// deny notes that the kernel refused to let the teardown signal id.
func (td *Teardown) deny(id proc.Ident) {
	if td.denied == nil {
		td.denied = make(map[proc.Ident]proc.Stat)
	}
	st, _ := proc.ReadStat(id.PID)
	td.denied[id] = st
	td.Log.Warn().Int("pid", id.PID).Uint64("start", id.Start).Str("comm", st.Comm).Int("uid", proc.UID(id.PID)).
		Msg("the kernel refused to let this teardown signal this process: it runs as a user this teardown may not signal")
}

// wait blocks until a member exits, the tracker reports a change, or the
// rescan interval (for newborns) or limit passes.
func (td *Teardown) wait(w *watcher, live map[proc.Ident]proc.Stat, limit time.Duration) {
	if limit <= 0 {
		return
	}
	// With nothing known alive, only an account that says otherwise (a
	// process that forks and exits in a loop, which each walk misses),
	// there is nothing to wait on: walk again almost at once, since each
	// pass ends the generation it finds only if that one has not forked
	// the next yet.
	// A process this teardown may not signal keeps that account up for
	// the whole survivor wait: chasing it would only spin, so look at the
	// rescan pace.
	switch {
	case len(live) == 0 && len(td.denied) == 0:
		limit = min(limit, chaseInterval)
	case len(live) == 0:
		limit = min(limit, rescanInterval)
	}
	if limit > rescanInterval && td.polls(w) {
		limit = rescanInterval
	}
	if w == nil {
		time.Sleep(limit)
		return
	}
	for id := range live {
		w.add(id)
	}
	w.wait(limit)
}

// settle records the fate of signalled processes that are no longer live:
// those that died after TERM only are "term".
func (td *Teardown) settle(pending map[proc.Ident]bool, live map[proc.Ident]proc.Stat, killed map[proc.Ident]bool) {
	for id := range pending {
		if _, ok := live[id]; ok {
			continue
		}
		delete(pending, id)
		if !killed[id] {
			td.note(id, record.FateTerm)
		}
	}
}

func (td *Teardown) note(id proc.Ident, f record.Fate) {
	if td.Fate != nil {
		td.Fate(id, f, time.Now())
	}
}
