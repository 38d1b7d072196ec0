// teardown.go owns the teardown engine: the union of the tracked lineage,
// the payload's process group and its cgroup is ended TERM first, then,
// after a grace that waits on the live set, sealed and KILLed until empty;
// what will not die within a bound is recorded as a survivor. Everything is
// signalled through pidfds opened after the start time was checked.
package hold

import (
	"os"
	"sort"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/gpu-hold/gpu-hold/proc"
	"github.com/gpu-hold/gpu-hold/tracker"
)

// rescanInterval is how often a tracker that cannot report births as they
// happen (procfs) is rescanned while teardown waits. Exits still wake the
// wait at once through pidfds.
const rescanInterval = 50 * time.Millisecond

// Fate is how a process ended, as recorded.
type Fate = tracker.Fate

// teardown ends one lineage.
type teardown struct {
	tr           tracker.Tracker
	pgid         int     // the payload's process group (0: none)
	cg           *cgroup // the payload's cgroup (nil: none)
	grace        time.Duration
	survivorWait time.Duration
	log          zerolog.Logger
	fate         func(id proc.Ident, f Fate, at time.Time) // may be nil
	onKill       func(at time.Time)                        // called when the KILL pass begins; may be nil
	onlyUID      bool                                      // end only processes of uid (reaping a user's lineage)
	uid          int
	selfPID      int
	selfPGID     int
}

// Outcome is what a teardown did.
type Outcome struct {
	Termed    int         // processes sent TERM
	Killed    int         // processes sent KILL
	Survivors []proc.Stat // alive after the survivor bound
	Start     time.Time   // teardown start
	End       time.Time   // teardown end
	Passes    int         // KILL passes it took
}

// targets is the union to end, now: live lineage members, live members of
// the payload's group, live members of the cgroup; never the hold itself
// or its own group.
func (td *teardown) targets() map[proc.Ident]proc.Stat {
	set := make(map[proc.Ident]proc.Stat)
	add := func(st proc.Stat) {
		if st.PID == td.selfPID || st.Dead() {
			return
		}
		if td.onlyUID && proc.UID(st.PID) != td.uid {
			return
		}
		set[st.Ident] = st
	}
	if td.tr != nil {
		live, err := td.tr.Live()
		if err != nil {
			td.log.Warn().Err(err).Msg("lineage walk failed; ending the group and cgroup only")
		}
		for _, st := range live {
			add(st)
		}
	}
	if td.pgid > 0 && td.pgid != td.selfPGID {
		proc.Walk(func(st proc.Stat) {
			if st.PGID == td.pgid {
				add(st)
			}
		})
	}
	if td.cg != nil {
		for _, st := range td.cg.Members() {
			add(st)
		}
	}
	return set
}

// run performs the teardown.
func (td *teardown) run() Outcome {
	out := Outcome{Start: time.Now()}
	td.selfPID = os.Getpid()
	td.selfPGID = syscall.Getpgrp()
	w, err := newWatcher()
	if err != nil {
		td.log.Warn().Err(err).Msg("epoll unavailable; teardown rescans on a timer")
	}
	stop := make(chan struct{})
	defer func() {
		close(stop)
		if w != nil {
			w.close()
		}
	}()
	if w != nil && td.tr != nil {
		if err := w.follow(td.tr.Changed(), stop); err != nil {
			td.log.Debug().Err(err).Msg("cannot follow tracker events; rescanning on a timer")
		}
	}
	pending := make(map[proc.Ident]time.Time) // signalled, not yet seen dead
	killed := make(map[proc.Ident]bool)

	// 1. TERM to everything alive now. Newborns during the grace are
	// tracked and waited on, but not sent TERM.
	for id := range td.targets() {
		if td.send(w, id, syscall.SIGTERM) {
			out.Termed++
			pending[id] = time.Now()
		}
	}
	td.log.Info().Int("processes", out.Termed).Dur("grace", td.grace).Msg("TERM sent")

	// 2. Grace: wait on the live set, event-driven, until it is empty or
	// the grace runs out.
	graceEnd := time.Now().Add(td.grace)
	live := td.targets()
	td.settle(pending, live, killed)
	for len(live) > 0 && time.Now().Before(graceEnd) {
		td.wait(w, live, time.Until(graceEnd))
		live = td.targets()
		td.settle(pending, live, killed)
	}

	// 3. Seal, then KILL until the union is empty or the survivor bound.
	if len(live) > 0 {
		if td.tr != nil {
			if err := td.tr.Seal(); err != nil {
				td.log.Warn().Err(err).Msg("cannot seal the lineage; repeating KILL passes")
			}
		}
		killStart := time.Now()
		if td.onKill != nil {
			td.onKill(killStart)
		}
		for len(live) > 0 {
			out.Passes++
			if td.cg != nil {
				if err := td.cg.Kill(); err != nil {
					td.log.Warn().Err(err).Str("cgroup", td.cg.Path).Msg("cgroup.kill failed")
				}
			}
			// Everything alive at the start of a pass is KILLed (by
			// cgroup.kill or by its pidfd), whichever reached it first.
			for id := range live {
				td.send(w, id, syscall.SIGKILL)
				if !killed[id] {
					killed[id] = true
					out.Killed++
					pending[id] = time.Now()
					td.note(id, tracker.FateKill)
				}
			}
			if time.Since(killStart) > td.survivorWait {
				break
			}
			td.wait(w, live, minDur(rescanInterval, td.survivorWait-time.Since(killStart)))
			live = td.targets()
			td.settle(pending, live, killed)
		}
		if out.Passes > 1 {
			td.log.Info().Int("passes", out.Passes).Msg("KILL passes")
		}
	}
	for _, st := range live {
		out.Survivors = append(out.Survivors, st)
		td.note(st.Ident, tracker.FateSurvivor)
	}
	sort.Slice(out.Survivors, func(i, j int) bool { return out.Survivors[i].PID < out.Survivors[j].PID })
	out.End = time.Now()
	return out
}

// send signals id through a verified pidfd (watched when possible).
func (td *teardown) send(w *watcher, id proc.Ident, sig syscall.Signal) bool {
	if w != nil {
		return w.signal(id, sig)
	}
	return proc.Signal(id, sig) == nil
}

// wait blocks until a member exits, the tracker reports a change, or the
// rescan interval (trackers that cannot report births) or limit passes.
func (td *teardown) wait(w *watcher, live map[proc.Ident]proc.Stat, limit time.Duration) {
	if limit <= 0 {
		return
	}
	needRescan := td.tr == nil || td.tr.Changed() == nil || td.pgid > 0 || td.cg != nil || w == nil || w.full()
	if needRescan && limit > rescanInterval {
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
func (td *teardown) settle(pending map[proc.Ident]time.Time, live map[proc.Ident]proc.Stat, killed map[proc.Ident]bool) {
	for id := range pending {
		if _, ok := live[id]; ok {
			continue
		}
		delete(pending, id)
		if !killed[id] {
			td.note(id, tracker.FateTerm)
		}
	}
}

func (td *teardown) note(id proc.Ident, f Fate) {
	if td.fate != nil {
		td.fate(id, f, time.Now())
	}
}

func minDur(a, b time.Duration) time.Duration {
	if a < b {
		return a
	}
	return b
}
