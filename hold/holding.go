// holding.go owns the payload under the token: the lineage pinned, the
// payload's cgroup, its start, the wait for what ends the hold (its exit,
// the max hold, a signal, the memory floor), the teardown, and what of all
// that goes into the record and the log.
package hold

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/record"
	"github.com/gpu-hold/gpu-hold/internal/teardown"
	"github.com/gpu-hold/gpu-hold/tracker"
)

// hold runs the payload under the token and tears it down.
func (h *holdRun) hold(ctx context.Context, tr *tracker.Lineage, sigc chan os.Signal) (Result, error) {
	h.pinned = h.pin(tr) // unpinned after the release (unpin)
	if err := h.contain(); err != nil {
		return h.fail(ExitUsage, "%v", err)
	}
	filter := h.filterDevices()
	defer filter.Close()
	baseline := h.deviceBaseline()
	if h.signalledBeforeStart(sigc) || h.yieldedBeforeStart() || h.lostNow() {
		return h.res, nil
	}
	p, err := h.start(tr)
	if err != nil {
		return h.res, err
	}
	defer p.reap()
	h.unfenced(filter)
	h.awaitEnd(ctx, p, sigc)
	cut, over := make(chan struct{}), make(chan struct{})
	heard := h.laterSignals(sigc, cut, over)
	out := h.endLineage(tr, p, cut)
	close(over)
	<-heard // the signals from here on are the device check's
	h.checkDevices(ctx, baseline, sigc)
	h.laterSignals(sigc, nil, nil)
	h.o.Log.Info().Int("exit_code", h.res.Code).Str("cause", string(h.res.Cause)).Int("term", out.Termed).Int("kill", out.Killed).Bool("cgroup_killed", out.CgroupKilled).Int("proc_walks", out.Walks).
		Dur("teardown_ms", out.End.Sub(out.Start)).Interface("survivors", h.survivors(out)).Str("record", h.res.Record).
		Msg("hold ended")
	return h.res, nil
}

// pin pins the lineage when the tracker can: the lineage then stays
// tracked in the kernel if this process dies, and the next holder ends it
// from there. It returns nil when nothing was pinned.
func (h *holdRun) pin(tr *tracker.Lineage) *tracker.Lineage {
	dir, err := tr.Pin()
	if errors.Is(err, tracker.ErrNotSupported) {
		return nil
	}
	if err != nil {
		h.o.Log.Warn().Err(err).Msg("cannot pin the lineage: if this hold dies, its successor ends only what the record names")
		return nil
	}
	h.o.Log.Debug().Str("pin", dir).Msg("lineage pinned")
	return tr
}

// unpin removes the lineage's pins once the token is released, whatever
// ended the hold: removing them is no reason for the next hold to wait,
// and a teardown that is over left them nothing a successor could end. (A
// hold that dies in between leaves them empty, for a later hold's sweep.)
func (h *holdRun) unpin() {
	if h.pinned == nil {
		return
	}
	if err := h.pinned.Unpin(); err != nil {
		h.o.Log.Warn().Err(err).Msg("cannot remove the lineage's pins; the next hold removes them once they are empty")
	}
}

// contain makes the payload's cgroup when the host allows (h.cg; nil:
// none), on record before the payload exists: a hold killed right after
// the fork still leaves its successor the cgroup to end.
func (h *holdRun) contain() error {
	cg, err := h.ahead.take(h)
	if err != nil || cg == nil {
		return err
	}
	h.cg = cg // removed after the release (see removeCgroup)
	h.rec.update(func(hi *record.HoldInfo) { hi.Cgroup = cg.Path })
	return nil
}

// signalledBeforeStart reports (and sets the result of) a signal that came
// while the token was taken or a dead holder reaped: the hold then ends
// before anything is started.
func (h *holdRun) signalledBeforeStart(sigc chan os.Signal) bool {
	select {
	case s := <-sigc:
		sig := s.(syscall.Signal)
		h.res.Signal = sig
		h.res.Code, h.res.Cause = endBy(sig)
		h.o.Log.Warn().Str("signal", sig.String()).Str("cause", string(h.res.Cause)).Msg("hold signalled before the payload started; not starting it")
		return true
	default:
		return false
	}
}

// running is the payload's own process while the hold waits on it.
type running struct {
	cmd    *exec.Cmd
	root   proc.Ident
	start  time.Time
	exited chan payloadExit // its exit, seen without reaping it (payload.go)
	ended  bool             // it has exited (a zombie until reap)
	// group is its process group, opened through its pidfd at the launch
	// so that the teardown does not open it after the payload's end
	// (nil: it could not be; the teardown tries again).
	group *proc.Group
}

// reap reaps the payload's zombie, once teardown is over: until then it
// keeps the payload's pid, and so its group's number, from being reused.
func (p *running) reap() {
	if p.ended {
		p.cmd.Wait()
	}
}

// start launches the payload (in its cgroup when there is one, without it
// when clone3 into the cgroup is refused under --cgroup=auto) and starts
// watching its exit. The error comes with h.res set.
func (h *holdRun) start(tr *tracker.Lineage) (*running, error) {
	o, log := &h.o, h.o.Log
	env := []string{tracker.HoldIDEnv + "=" + h.id, "GPU_HOLD_RESOURCE=" + o.Resource, "GPU_HOLD_LABEL=" + o.Label}
	env = append(env, h.poolEnv()...)
	env = append(env, h.fenceEnv()...)
	cmd, root, err := launch(o, tr, h.cg, env)
	var sf *startFailure
	if err != nil && h.cg != nil && o.Cgroup == "auto" && errors.As(err, &sf) {
		log.Warn().Err(err).Msg("cannot start the payload in its own cgroup; running without it")
		h.cg.Remove(0)
		h.cg = nil
		cmd, root, err = launch(o, tr, nil, env)
	}
	if err != nil {
		return nil, h.launchFailed(err)
	}
	p := &running{cmd: cmd, root: root, start: time.Now(), exited: make(chan payloadExit, 1)}
	p.group, _ = proc.OpenGroup(root)
	h.rec.started(root, cgroupPath(h.cg), p.start)
	ev := log.Info().Int("pid", root.PID).Str("backend", tr.Backend()).Str("seal", h.res.Seal)
	if progs := tr.Programs(); progs != "" {
		ev = ev.Str("bpf_programs", progs) // a spare taken, or loaded by this hold
	}
	ev.Bool("cgroup", h.cg != nil).Strs("cmd", o.Cmd).Msg("payload started")
	go tracker.PrepareGroupWalk()
	go func() {
		ex, err := waitNoReap(cmd.Process.Pid)
		if err != nil {
			log.Error().Err(err).Msg("cannot wait for the payload's process")
		}
		p.exited <- ex
	}()
	return p, nil
}

// launchFailed sets the result of a payload that could not be started.
func (h *holdRun) launchFailed(err error) error {
	var le *LaunchError
	if errors.As(err, &le) {
		h.res.Code, h.res.Cause = le.Code, record.CauseExecFailed
		return &Error{Code: le.Code, Err: err}
	}
	if h.cg != nil {
		h.cg.Kill() // whatever the payload started before it was stopped
	}
	_, ferr := h.fail(ExitUsage, "%v", err)
	return ferr
}

// awaitEnd waits for what ends the hold: the payload's own exit, the max
// hold, a signal, the memory floor, or (a yielding hold) a ticket that does
// not yield, and sets the result by it.
func (h *holdRun) awaitEnd(ctx context.Context, p *running, sigc chan os.Signal) {
	o, log := &h.o, h.o.Log
	var deadline <-chan time.Time
	if o.MaxHold > 0 {
		left := h.maxHoldLeft()
		t := time.NewTimer(left)
		defer t.Stop()
		deadline = t.C
		h.rec.update(func(hi *record.HoldInfo) { hi.Times.Deadline = p.start.Add(left) })
	}
	mctx, mcancel := context.WithCancel(ctx)
	defer mcancel()
	memLow := h.watchMemory(mctx)
	select {
	case ex := <-p.exited:
		p.ended = true
		h.res.Code, h.res.Cause, h.res.Signal = ex.exitCode()
		h.rec.event(ex.event(p.root))
		log.Info().Int("code", h.res.Code).Str("cause", string(h.res.Cause)).Msg("payload exited; ending what it left running")
	case <-deadline:
		h.res.Code, h.res.Cause = ExitMaxHold, record.CauseMaxHold
		log.Warn().Dur("max_hold_ms", o.MaxHold).Msg("max hold reached; ending the payload")
	case s := <-sigc:
		sig := s.(syscall.Signal)
		h.res.Signal = sig
		h.res.Code, h.res.Cause = endBy(sig)
		log.Warn().Str("signal", sig.String()).Str("cause", string(h.res.Cause)).Msg("hold signalled; ending the payload first")
	case <-h.contended:
		h.yielded("a ticket that does not yield queued; yielding: ending the payload")
	case low := <-memLow:
		h.res.Code, h.res.Cause = ExitMemFloor, record.CauseMemFloor
		log.Error().Uint64("available", low.Available).Uint64("floor", low.Floor).Msg(low.Error() + "; ending the payload")
	case li := <-h.lostC():
		h.leaseLost(li)
	}
	h.lostNow() // lost as well (a holder thawed after a stop): that is the end on record
}

// laterSignals handles, in the background, the signals that come once the
// hold is ending, until over is closed (then the channel it returns is
// closed): the first INT or TERM cuts the grace short (closes cut: the
// teardown goes on, KILL now), as a second Ctrl-C does for srun and
// docker; any other says that teardown goes on.
func (h *holdRun) laterSignals(sigc chan os.Signal, cut chan struct{}, over <-chan struct{}) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			var s os.Signal
			select {
			case <-over:
				return
			case s = <-sigc:
			}
			if (s == syscall.SIGINT || s == syscall.SIGTERM) && cut != nil {
				h.o.Log.Warn().Str("signal", s.String()).Msg("signalled again while ending the hold: cutting the grace short, KILL now")
				close(cut)
				cut = nil
				continue
			}
			h.o.Log.Warn().Str("signal", s.String()).Msg("already ending the hold; teardown continues")
		}
	}()
	return done
}

// endLineage tears the lineage down, waits briefly for the payload's own
// process, and puts the teardown, the survivors and the tracker's counters
// on record (closing the tracker first, so the events it still holds
// reach the record; its pins go after the release: unpin).
func (h *holdRun) endLineage(tr *tracker.Lineage, p *running, cut <-chan struct{}) teardown.Outcome {
	log := h.o.Log
	td := &teardown.Teardown{Tracker: tr, PGID: p.root.PID, Root: p.root, Cgroup: h.cg, Grace: h.grace(), SurvivorWait: h.o.SurvivorWait, Log: log, Fate: h.rec.fate, CutGrace: cut, Group: p.group}
	td.OnKill = func(at time.Time) { h.rec.update(func(hi *record.HoldInfo) { hi.Times.KillStart = at }) }
	h.rec.update(func(hi *record.HoldInfo) { hi.Times.TeardownStart = time.Now() })
	out := td.Run()
	h.res.Teardown = out
	h.awaitPayload(p)
	survivors := h.survivors(out)
	for _, st := range out.Survivors {
		log.Error().Int("pid", st.PID).Uint64("start", st.Start).Str("comm", st.Comm).Str("state", string(st.State)).
			Msg("survivor: still alive after KILL and the survivor wait; releasing the token with it on record")
	}
	// eBPF's kernel objects go after the release (lazyTracker.close).
	if err := tr.Finish(); err != nil {
		log.Warn().Err(err).Msg("closing the tracker")
	}
	counters := tr.Counters()
	h.lost = counters.LostEvents
	h.rec.update(func(hi *record.HoldInfo) {
		hi.Times.TeardownEnd = out.End
		hi.Survivors = survivors
		hi.Counters = counters
	})
	if counters.LostEvents > 0 || counters.MapOverflow > 0 {
		log.Warn().Uint64("lost_events", counters.LostEvents).Uint64("map_overflow", counters.MapOverflow).
			Msg("the tracker lost events: the record is incomplete (the teardown still ended the group and cgroup)")
	}
	return out
}

// awaitPayload waits up to a second for the payload's own process, when
// the teardown ended the hold before it exited.
func (h *holdRun) awaitPayload(p *running) {
	if p.ended {
		return
	}
	select {
	case ex := <-p.exited:
		p.ended = true
		h.rec.event(ex.event(p.root))
	case <-time.After(time.Second):
		h.o.Log.Error().Int("pid", p.root.PID).Msg("the payload's own process did not exit")
	}
}

// survivors are the teardown's survivors by identity.
func (h *holdRun) survivors(out teardown.Outcome) []proc.Ident {
	ids := make([]proc.Ident, 0, len(out.Survivors))
	for _, st := range out.Survivors {
		ids = append(ids, st.Ident)
	}
	return ids
}
