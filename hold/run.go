// Package hold runs one hold: queue for the token, launch the payload
// tracked from its first instruction, wait for its end (exit, max hold,
// signal, memory floor), tear down the whole lineage, check the device,
// write the record and only then release. run.go owns that sequence.
//
// Each verb's engine, and where it lives:
//   - run (Run): run.go, the sequence; its phases in options.go, fleet.go
//     (the queue), pool.go, status.go, lobby.go, lease.go, cgroup_ahead.go,
//     launch.go, payload.go, shield.go, holding.go, live.go, withhold.go,
//     checks.go, devfind.go, devfilter.go, record.go, retention.go,
//     stepaside.go, spares.go, lazytracker.go, backend.go, exitcode.go.
//   - yield (--yield, and Keep for --restart): yield*.go.
//   - reap (Reap, and a successor's reap of the holders its grant names):
//     reap*.go; PruneFleet in retention.go.
//   - cancel (CancelRunning): cancel*.go.
//
// What every subcommand shares around the queue directory (its choice and
// checks, the logger, the ticket's host, the resources known there) is not
// here but in internal/fleetenv.
package hold

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/cgroup"
	"github.com/gpu-hold/gpu-hold/internal/fleetenv"
	"github.com/gpu-hold/gpu-hold/internal/memfloor"
	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/record"
	"github.com/gpu-hold/gpu-hold/internal/teardown"
	"github.com/gpu-hold/gpu-hold/queue"
	"github.com/gpu-hold/gpu-hold/tracker"
)

// Result is how a hold ended.
type Result struct {
	Code     int
	Cause    record.Cause
	Signal   syscall.Signal // the payload's killing signal, or the one the hold got
	HoldID   string
	Record   string
	Backend  string
	Seal     string // how the tracker's seal stops forks: tracker.Lineage.SealMode
	Teardown teardown.Outcome
}

// Error is a failure with the exit code it maps to.
type Error struct {
	Code int
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

func failf(code int, format string, a ...any) error {
	return &Error{Code: code, Err: fmt.Errorf(format, a...)}
}

// newHoldID names a hold: time of day plus randomness, unique per host.
func newHoldID() string {
	var b [4]byte
	rand.Read(b[:])
	return time.Now().UTC().Format("20060102T150405") + "-" + hex.EncodeToString(b[:])
}

// Run performs one hold and returns its exit code and cause. An error is
// returned (with its code, see Error) for failures before the payload ran.
func Run(ctx context.Context, o Options) (Result, error) {
	if err := o.Validate(); err != nil {
		return Result{Code: ExitUsage}, &Error{Code: ExitUsage, Err: err}
	}
	if err := checkCommand(o.Cmd[0]); err != nil {
		var le *LaunchError
		errors.As(err, &le)
		return Result{Code: le.Code, Cause: record.CauseExecFailed}, &Error{Code: le.Code, Err: err}
	}
	if err := shield(); err != nil {
		return Result{Code: ExitUsage}, &Error{Code: ExitUsage, Err: err}
	}
	h := &holdRun{o: o, id: newHoldID(), ahead: &cgroupAhead{}}
	if o.Resume != nil {
		h.id = o.Resume.HoldID
	}
	h.res.HoldID = h.id

	// Signals from here on end the hold (while waiting: remove the ticket).
	sigc := make(chan os.Signal, 4)
	signal.Notify(sigc, endSignals...)
	// A cancel that comes once the hold is over is ignored, not fatal
	// (SIGUSR1's default): this defer runs after the Stop below.
	defer signal.Ignore(CancelSignal)
	defer signal.Stop(sigc)
	signal.Ignore(syscall.SIGPIPE)

	lt, err := h.prepare()
	if err != nil {
		return Result{Code: ExitUsage}, &Error{Code: ExitUsage, Err: err}
	}
	defer lt.close()

	defer h.ahead.drop()
	grant, err := h.acquire(h.atHead(ctx, lt), sigc)
	if err != nil {
		h.writeMetrics(h.granted, time.Now()) // a ticket that never got the token counts too
		return h.res, err
	}
	granted := h.granted
	stopLive := h.liveMetrics()
	h.contended = h.contendedOf(grant)
	h.grant = grant
	tr, err := h.atGrant(lt, grant)
	if err != nil {
		h.writeMetrics(granted, time.Now())
		return h.res, err
	}
	_, err = h.hold(ctx, tr, sigc)
	if err != nil && h.res.Code == 0 {
		h.res.Code, h.res.Cause = ExitUsage, record.CauseError
	}
	h.finish(grant, granted, stopLive)
	return h.res, err
}

// prepare chooses what the hold needs before it queues: the tracker's
// backend (a host that cannot track must not make anyone wait for it; the
// tracker itself is made at the head of the queue or at the grant, see
// lazytracker.go), the device nodes, the pool and the yield.
func (h *holdRun) prepare() (*lazyTracker, error) {
	h.rec = &recorder{}
	lt, err := h.chooseTracker()
	if err != nil {
		return nil, err
	}
	h.res.Backend = lt.backend
	if h.devices, err = devicePatterns(&h.o); err == nil {
		if err = h.resolvePool(); err == nil {
			err = h.yieldUsable()
		}
	}
	if err != nil {
		lt.close()
		return nil, err
	}
	return lt, nil
}

// finish closes the record, then releases the token (the record is
// complete before the token goes to the next ticket), then does what no
// one waits for: unpin, metrics, the cgroup, the records' retention.
func (h *holdRun) finish(grant queue.Grant, granted time.Time, stopLive func()) {
	log := h.o.Log
	h.rec.close(&h.res, time.Now(), log)
	stopLive()
	if rerr := grant.Release(); rerr != nil {
		log.Error().Err(rerr).Msg("releasing the token failed; the next hold takes it over when this process exits")
	} else {
		log.Info().Str("resource", h.o.Resource).Msg("token released")
	}
	stepAside()
	h.unpin()
	h.writeMetrics(granted, time.Now())
	h.removeCgroup()
	h.rec.prune(&h.o, h.res.Record)
}

// atHead makes ctx's queue wait start, at the head of the queue and in the
// background, what the hold needs only once it holds: its tracker (eBPF's
// load) and its payload's cgroup.
func (h *holdRun) atHead(ctx context.Context, lt *lazyTracker) context.Context {
	return queue.WithHeadNotice(ctx, func() {
		lt.start()
		h.ahead.start(h)
	})
}

// removeCgroup removes the payload's cgroup, after the release: the next
// hold does not wait for it. A cgroup that still holds a survivor stays,
// and the log says where.
func (h *holdRun) removeCgroup() {
	if h.cg == nil {
		return
	}
	bound := time.Second
	if len(h.res.Teardown.Survivors) > 0 {
		bound = 0
	}
	if err := h.cg.Remove(bound); err != nil {
		h.o.Log.Warn().Err(err).Msg("the payload's cgroup is left behind (a survivor may still be in it): remove it once it is empty")
	}
}

// holdRun is the state of one hold.
type holdRun struct {
	o             Options
	id            string
	res           Result
	ticket        queue.Ticket
	rec           *recorder
	queued        time.Time
	backendNote   string
	devices       []string        // device node patterns checked at release
	deviceHolders int             // holders found after teardown
	lost          uint64          // events the tracker lost
	memSource     memfloor.Source // nil: /proc/meminfo
	granted       time.Time       // when the token was taken (zero: never)
	leased        queue.Fenced    // the grant, when its token can be lost (etcd)
	grant         queue.Grant     // the token, held (nil: not yet)
	// cg is the payload's cgroup, if any; ahead makes it (cgroup_ahead.go).
	cg    *cgroup.Cgroup
	ahead *cgroupAhead
	// pinned is the tracker's lineage, pinned at the grant (nil: not).
	pinned *tracker.Lineage
	// pool is the pool side of the hold (pool.go).
	pool poolHold
	// contended is closed when a yielding hold must give way (yield.go).
	contended <-chan struct{}
}

// acquire takes a ticket, waits for the token (event-driven) and ends the
// lineage of the dead holders it names; a signal or the wait allowance
// removes the ticket and ends the hold with 75/128+S. Its record is open
// from the moment the token is taken.
func (h *holdRun) acquire(ctx context.Context, sigc chan os.Signal) (queue.Grant, error) {
	o, log := &h.o, h.o.Log
	self, err := proc.Self()
	if err != nil {
		return nil, failf(ExitUsage, "cannot read own identity from /proc: %v", err)
	}
	w, err := h.queueUp(ctx, self)
	if err != nil {
		return nil, err
	}
	if err := checkRecord(o); err != nil {
		w.Cancel()
		return nil, &Error{Code: ExitUsage, Err: err}
	}
	if sig := h.resumedBy(); sig != nil {
		w.Cancel()
		return nil, h.waitFailed(nil, sig)
	}
	h.toLobby(ctx, w, sigc)

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if o.Wait > 0 {
		wctx, cancel = context.WithDeadline(wctx, h.queued.Add(o.Wait))
		defer cancel()
	}
	signalled := watchSignal(wctx, cancel, sigc)
	status := newStatusLine(o.Status)
	var progress func(queue.Position)
	if o.Status != nil {
		progress = status.update // a waiter with no one to show its place to wakes less
	}
	grant, err := w.Wait(wctx, progress)
	status.clear()
	if err != nil {
		w.Cancel()
		return nil, h.waitFailed(err, signalled())
	}
	log.Info().Uint64("ticket", h.ticket.Seq).Str("resource", o.Resource).Dur("waited_ms", time.Since(h.queued)).Msg("token taken")
	h.granted = time.Now()
	if err := h.rec.open(h, h.granted); err != nil {
		grant.Release()
		return nil, &Error{Code: ExitUsage, Err: err}
	}
	if err := h.poolGranted(); err != nil {
		h.rec.close(&h.res, time.Now(), log)
		grant.Release()
		return nil, &Error{Code: ExitUsage, Err: err}
	}
	h.fenced(grant)
	err = h.reapDead(wctx, grant)
	if sig := signalled(); err != nil || sig != nil {
		// A signal while reaping ends the hold before its payload runs.
		err = h.waitFailed(err, sig)
		h.rec.close(&h.res, time.Now(), log)
		grant.Release()
		return nil, err
	}
	return grant, nil
}

// queueUp takes a ticket, or takes back the one the lobby kept.
func (h *holdRun) queueUp(ctx context.Context, self proc.Ident) (queue.Waiter, error) {
	o, log := &h.o, h.o.Log
	h.res.Record = recordPath(o, h.id)
	if o.Resume != nil {
		h.queued = o.Resume.Queued
		w, err := h.adopt()
		if err == nil {
			h.ticket = w.Ticket()
			log.Info().Uint64("ticket", h.ticket.Seq).Msg("back from the lobby")
		}
		return w, err
	}
	h.queued = time.Now()
	w, err := h.enqueue(ctx, queue.Ticket{
		Resource: o.Resource, Label: o.Label, Holder: self, UID: os.Getuid(), Host: fleetenv.TicketHost(),
		Cmd: o.Cmd, Created: h.queued, HoldID: h.id, Record: h.res.Record, Yield: o.Yield, MaxHold: o.MaxHold,
	})
	if err != nil {
		return nil, enqueueFailed(err)
	}
	h.ticket = w.Ticket()
	log.Info().Uint64("ticket", h.ticket.Seq).Str("resource", o.Resource).Str("label", o.Label).Msg("waiting for the token")
	return w, nil
}

// watchSignal cancels ctx (with cancel) on the first signal on sigc. The
// function it returns ends the watch (cancelling ctx) and returns the
// signal it took, if any.
func watchSignal(ctx context.Context, cancel context.CancelFunc, sigc chan os.Signal) func() os.Signal {
	var got os.Signal
	watching := make(chan struct{})
	go func() {
		defer close(watching)
		select {
		case s := <-sigc:
			got = s
			cancel()
		case <-ctx.Done():
		}
	}()
	return func() os.Signal { cancel(); <-watching; return got }
}

// waitFailed sets the result of a wait that ended without the token (or
// with a dead holder this hold may not end) and returns its error.
func (h *holdRun) waitFailed(err error, got os.Signal) error {
	o := &h.o
	var to *queue.WaitTimeout
	var be *blockedError
	switch {
	case got != nil:
		h.res.Signal = got.(syscall.Signal)
		h.res.Code, h.res.Cause = endBy(h.res.Signal)
		return failf(h.res.Code, "got %v while waiting for the token; ticket %d removed", signalName(h.res.Signal), h.ticket.Seq)
	case errors.As(err, &to):
		to.Waited = o.Wait // the allowance as given, not as measured (1.000926287s)
		h.res.Code, h.res.Cause = ExitQueue, record.CauseQueue
		return &Error{Code: ExitQueue, Err: fmt.Errorf("%v; ticket %d removed (raise -w, or see gpu-hold queue -r %s)", err, h.ticket.Seq, o.Resource)}
	case errors.As(err, &be):
		h.res.Code, h.res.Cause = ExitQueue, record.CauseQueue
		return &Error{Code: ExitQueue, Err: fmt.Errorf("%v; ticket %d removed, the command not run (root can end them: gpu-hold --dir %s reap -r %s)", err, h.ticket.Seq, o.Dir, o.Resource)}
	case errors.Is(err, queue.ErrRemoved):
		h.res.Code, h.res.Cause = ExitQueue, record.CauseQueue
		return failf(ExitQueue, "ticket %d was removed from the %s queue while waiting (%s); not running the command", h.ticket.Seq, o.Resource, removedWhy(err))
	}
	var he *Error
	if errors.As(err, &he) {
		return err
	}
	return &Error{Code: ExitUsage, Err: fmt.Errorf("waiting for the %s token: %w", o.Resource, err)}
}

func (h *holdRun) fail(code int, format string, a ...any) (Result, error) {
	h.res.Code = code
	return h.res, failf(code, format, a...)
}

// makeCgroup creates the payload's cgroup per --cgroup: auto uses one when
// the host allows it, on requires one, off never makes one.
func (h *holdRun) makeCgroup() (*cgroup.Cgroup, error) {
	if h.o.Cgroup == "off" {
		return nil, nil
	}
	cg, err := cgroup.New(h.id)
	if err != nil {
		if h.o.Cgroup == "on" {
			return nil, fmt.Errorf("--cgroup=on but %v; run as root on cgroup v2, or use --cgroup=auto", err)
		}
		h.o.Log.Debug().Err(err).Msg("no cgroup containment")
		return nil, nil
	}
	return cg, nil
}

func cgroupPath(cg *cgroup.Cgroup) string {
	if cg == nil {
		return ""
	}
	return cg.Path
}
