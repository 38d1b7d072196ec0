// pool_wait.go owns a waiting pool ticket: each round it takes the
// scheduling lock, reads the devices, asks Schedule whether it may start,
// and if so starts (pool_take.go); otherwise it sleeps on the pool
// directory (tickets come and go, a holder's pool ticket goes when it
// releases), the pidfds of the devices' holders and of the tickets ahead,
// and the end of its context; quietly on the ticket ahead alone when only
// FIFO order can move it.
package queue

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/proc"
)

// PoolWaiter is a pool ticket waiting for its devices.
type PoolWaiter struct {
	p       *Pool
	w       *waiter
	waiting atomic.Pointer[string] // what the last round waited for
}

// Waiting says what the last round waited for ("" before the first).
func (pw *PoolWaiter) Waiting() string {
	if s := pw.waiting.Load(); s != nil {
		return *s
	}
	return ""
}

// Ticket is the pool ticket.
func (pw *PoolWaiter) Ticket() Ticket { return pw.w.e.Ticket }

// Cancel removes the pool ticket (idempotent).
func (pw *PoolWaiter) Cancel() error { return pw.w.Cancel() }

// Wait blocks until the schedule lets this ticket start and it took all
// its devices, as Waiter.Wait does for a token: ErrRemoved, ctx.Err() or a
// *WaitTimeout end it, with the ticket removed.
func (pw *PoolWaiter) Wait(ctx context.Context, progress func(Position)) (*PoolGrant, error) {
	l, err := pw.watch(ctx, progress)
	if err != nil {
		pw.Cancel()
		return nil, err
	}
	defer l.close()
	for {
		if g, done, err := l.step(); done {
			return g, err
		}
	}
}

// poolLoop is the state of a pool ticket's Wait across its rounds.
type poolLoop struct {
	pw       *PoolWaiter
	ctx      context.Context
	progress func(Position)
	start    time.Time
	ev       *events
	sched    *tokenLock
	stop     func() bool
	last     Position
	reported bool
	backoff  time.Duration
	// busyTries counts rounds in a row that found the lock busy.
	busyTries int
}

// lockRetry and lockRetries pace the retries of a busy scheduling lock;
// past them (a lock held for long: not a round) the backoff takes over.
const (
	lockRetry   = 2 * time.Millisecond
	lockRetries = 500
)

// quietRecheck bounds a quiet waiter's sleep: no device can move it, so
// this is only a guard against a wake-up it was never sent.
const quietRecheck = 10 * time.Second

// watch sets up what the rounds sleep on: inotify on the pool dir, the
// scheduling lock's file, and a wake-up when ctx ends.
func (pw *PoolWaiter) watch(ctx context.Context, progress func(Position)) (*poolLoop, error) {
	ev, err := newEvents(pw.p.q)
	if err != nil {
		return nil, err
	}
	sched, err := pw.p.q.openToken()
	if err != nil {
		go ev.close()
		return nil, err
	}
	l := &poolLoop{pw: pw, ctx: ctx, progress: progress, start: time.Now(), ev: ev, sched: sched}
	l.stop = context.AfterFunc(ctx, ev.kickNow)
	return l, nil
}

func (l *poolLoop) close() {
	l.stop()
	l.sched.close()
	go l.ev.close() // an inotify close waits for an RCU grace period
}

// step is one round and, when it did not start, the sleep after it.
func (l *poolLoop) step() (*PoolGrant, bool, error) {
	pw := l.pw
	if pw.w.removed() {
		pw.w.drop()
		return nil, true, ErrRemoved
	}
	if l.ctx.Err() != nil {
		return nil, true, pw.w.giveUp(l.ctx, l.start, nil, nil)
	}
	g, r, err := pw.round(l.sched)
	if err != nil || g != nil {
		if err != nil {
			pw.Cancel()
		}
		return g, true, err
	}
	l.tell(Position{Ahead: r.ahead, Waiting: pw.Waiting()})
	if err := l.sleep(r); err != nil {
		pw.Cancel()
		return nil, true, err
	}
	return nil, false, nil
}

// quiet reports whether the waiter may sleep on the ticket directly ahead
// alone: with nobody to show its place to, behind a waiting ticket, and
// unable to backfill (no bound, or backfill off), it can start only in
// FIFO order, so nothing but that ticket starting, going or dying can
// move it.
func (l *poolLoop) quiet(r roundResult) bool {
	return l.progress == nil && r.next != nil && !r.busy && (l.pw.w.e.Bound <= 0 || !l.pw.p.backfill)
}

// tell gives progress a position that changed.
func (l *poolLoop) tell(pos Position) {
	if l.progress != nil && (!l.reported || pos != l.last) {
		l.progress(pos)
		l.last, l.reported = pos, true
	}
}

// sleep waits for what can move the ticket: the pool dir, the pidfds of
// the devices' holders and of the tickets ahead, ctx's end (a quiet
// waiter: the ticket ahead alone); on a short backoff when unsure (the
// lock was busy, a pid could not be watched), else at most a second, a
// safety re-check, since the devices' own queues are not watched.
func (l *poolLoop) sleep(r roundResult) error {
	timeout := time.Second
	if r.busy && l.busyTries < lockRetries {
		// A round under the lock takes a few ms: retry soon, not on a
		// growing backoff, or a hand-off waits for the slowest backoff.
		l.busyTries++
		return l.ev.wait(lockRetry)
	}
	if !r.busy {
		l.busyTries = 0
	}
	if l.quiet(r) {
		// It can start only once the ticket ahead has: wake for that one.
		me, next := l.pw.w.e, r.next
		if l.ev.watchTickets(l.pw.p.q, watchedTicket{me.name, me.dev, me.ino}, watchedTicket{next.name, next.dev, next.ino}) {
			return nil // watched just now: look again first
		}
		r.watch = []proc.Ident{next.Holder}
		timeout = quietRecheck
	} else {
		l.ev.watchAll(l.pw.p.q, l.sched)
	}
	if l.ev.watchPids(r.watch) || r.unsure || r.busy {
		l.backoff = min(max(2*l.backoff, 5*time.Millisecond), time.Second)
		timeout = l.backoff
	} else {
		l.backoff = 0
	}
	if dl, ok := l.ctx.Deadline(); ok {
		timeout = min(timeout, max(time.Until(dl), 0))
	}
	return l.ev.wait(timeout)
}

// roundResult is what a round that did not start saw.
type roundResult struct {
	ahead  int
	watch  []proc.Ident
	unsure bool
	busy   bool   // the scheduling lock was another waiter's
	next   *entry // the waiting ticket directly ahead, if any
}

// round is one look under the scheduling lock.
func (pw *PoolWaiter) round(sched *tokenLock) (*PoolGrant, roundResult, error) {
	var r roundResult
	got, err := pw.p.q.tryLock(sched)
	if err != nil {
		return nil, r, err
	}
	if !got {
		r.busy = true // another waiter is scheduling: a moment
		return nil, r, nil
	}
	defer sched.unlock()
	snap, err := pw.p.q.scanFor(pw.w.e.Seq)
	if err != nil {
		return nil, r, err
	}
	pw.p.q.cleanup(snap)
	reqs := pw.p.requests(snap)
	views, states, err := pw.p.view()
	if err != nil {
		return nil, r, err
	}
	r = pw.watched(views, snap)
	now := time.Now()
	d := Schedule(states, reqs, pw.w.e.Seq, now, pw.p.backfill)
	d.At = now // under the lock: decisions are ordered by it
	if !d.Start {
		pw.waiting.Store(&d.Wait)
		return nil, r, nil
	}
	g, err := pw.take(d)
	if errors.Is(err, errBusy) {
		r.unsure = true
		return nil, r, nil
	}
	return g, r, err
}

// watched is what a round that does not start sleeps on: the devices'
// holders and the tickets ahead, by pidfd; a device busy without a holder
// (a lock nobody's ticket explains, a hold of the device itself waiting)
// makes the round unsure.
func (pw *PoolWaiter) watched(views []devView, snap *snapshot) roundResult {
	var r roundResult
	for _, v := range views {
		if v.holder != nil {
			r.watch = append(r.watch, v.holder.Holder)
		} else if v.busy {
			r.unsure = true
		}
	}
	for i, e := range snap.tickets {
		if e.live && !e.granted() && len(e.Devices) == 0 && e.Seq < pw.w.e.Seq {
			r.ahead++
			r.watch = append(r.watch, e.Holder)
			r.next = &snap.tickets[i]
		}
	}
	return r
}
