// wait.go owns a waiting ticket: the wait loop (rescan on every event,
// take the token when no live ticket is ahead), the wait allowance, the
// removal of our ticket by someone else, and cancelling.
package queue

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/proc"
)

// pidWatchAhead bounds the pidfds a waiter holds for tickets ahead (the
// nearest ones); the others still wake it through the directory.
const pidWatchAhead = 8

type waiter struct {
	q  *dirQueue
	mu sync.Mutex
	e  entry // our ticket
	fd int   // holds our ticket's lock; -1 once removed, cancelled or granted
	// below bounds the live tickets ahead of ours (newTicket); -1: unknown.
	below int
}

func (w *waiter) Ticket() Ticket { return w.e.Ticket }

// Wait blocks until no live ticket is ahead and the token is free, then
// takes it. See Waiter.Wait.
func (w *waiter) Wait(ctx context.Context, progress func(Position)) (Grant, error) {
	start := time.Now()
	w.mu.Lock()
	gone := w.fd < 0
	w.mu.Unlock()
	if gone {
		return nil, ErrRemoved
	}
	// Uncontended: the token at once, without setting up inotify.
	if g, done, err := w.tryNow(); done {
		return g, err
	}
	// Contended: watch, then look, take or sleep, round after round.
	l, err := w.watchLoop(ctx, progress, start)
	if err != nil {
		w.Cancel()
		return nil, err
	}
	defer l.close()
	for {
		if g, done, err := l.round(); done {
			return g, err
		}
	}
}

// waitLoop is the state of a contended Wait across its rounds.
type waitLoop struct {
	w        *waiter
	ctx      context.Context
	progress func(Position)
	start    time.Time
	ev       *events
	tok      *tokenLock
	granted  bool        // tok now belongs to the Grant
	stop     func() bool // ends the wake-up on ctx's end
	last     Position    // what progress was last told
	reported bool
	backoff  time.Duration
	// lockedAway counts the looks in a row that found the token locked
	// by a process with no valid ticket (see take).
	lockedAway int
	// snap is the last look's reading of the queue; locker, what holds
	// the token up that no gpu-hold holder explains (wait_locker.go);
	// checked, the holder whose process was last checked to be a gpu-hold,
	// and checkedAs what it was found to be (nil: a gpu-hold).
	snap      *snapshot
	locker    *Locker
	checked   proc.Ident
	checkedAs *Locker
	// placeOnly: the loop ends once at most within live tickets are
	// ahead, without the token, and leaves the ticket in place when it
	// fails (WaitAhead).
	placeOnly bool
	within    int
}

// watchLoop sets up what a contended Wait sleeps on: inotify on the queue,
// the token, and a wake-up when ctx ends.
func (w *waiter) watchLoop(ctx context.Context, progress func(Position), start time.Time) (*waitLoop, error) {
	ev, err := newEvents(w.q)
	if err != nil {
		return nil, err
	}
	tok, err := w.q.openToken()
	if err != nil {
		go ev.close()
		return nil, err
	}
	l := &waitLoop{w: w, ctx: ctx, progress: progress, start: start, ev: ev, tok: tok}
	l.stop = context.AfterFunc(ctx, ev.kickNow)
	return l, nil
}

// close undoes watchLoop, keeping the token when it was granted.
func (l *waitLoop) close() {
	l.stop()
	if !l.granted {
		l.tok.close()
	}
	// Closing an inotify fd waits for an RCU grace period (milliseconds):
	// do it off the hand-off path.
	go l.ev.close()
}

// round is one look at the queue: take the token when it is ours, else
// watch what can move us and sleep until it does. done says Wait is over.
func (l *waitLoop) round() (g Grant, done bool, err error) {
	ahead, holder, err := l.look()
	if err != nil || l.placeOnly && len(ahead) <= l.within {
		return nil, true, err
	}
	l.heldUpBy(ahead, holder)
	// A waiter with tickets ahead of it, and no one to show its place
	// to, wakes only for what can move it: the ticket directly ahead
	// going (or its owner dying) and its own ticket being removed. The
	// rest of the queue does not wake on every hand-off.
	quiet := l.progress == nil && len(ahead) > 0 && !l.w.e.Yield
	var watch []proc.Ident
	if holder != nil && !quiet {
		watch = append(watch, holder.Holder)
	}
	unsure := false
	if len(ahead) > 0 || holder != nil {
		l.lockedAway = 0
	}
	if len(ahead) == 0 && holder == nil {
		g, locker, done, err := l.take()
		if done {
			return g, true, err
		}
		unsure = true
		watch = append(watch, locker...)
	}
	l.tell(Position{Ahead: len(ahead), Holder: holder})
	for i := l.mover(ahead); i >= 0 && i >= len(ahead)-pidWatchAhead; i-- {
		watch = append(watch, ahead[i].Holder)
		if quiet {
			break
		}
	}
	if l.watchQueue(ahead, quiet) {
		// Something may have changed between the scan and the new
		// watches: look again, now watched, before sleeping.
		return nil, false, nil
	}
	if err := l.sleep(watch, unsure); err != nil {
		l.cancel()
		return nil, true, err
	}
	return nil, false, nil
}

// look scans the queue for our place, tells progress when it changed, and
// fails when our ticket was removed or ctx ended.
func (l *waitLoop) look() (ahead []entry, holder *Ticket, err error) {
	w := l.w
	if w.removed() {
		w.drop()
		return nil, nil, ErrRemoved
	}
	snap, err := l.scan()
	if err != nil {
		l.cancel()
		return nil, nil, err
	}
	ahead, holder = l.place(snap)
	l.snap = snap
	if l.ctx.Err() != nil {
		if l.placeOnly {
			return nil, nil, l.ctx.Err()
		}
		return nil, nil, w.giveUp(l.ctx, l.start, holder, l.locker)
	}
	if len(ahead) == 0 {
		atHead(l.ctx)
	}
	return ahead, holder, nil
}

// tell shows pos, with what holds the token up, to progress when it
// changed.
func (l *waitLoop) tell(pos Position) {
	pos.Locker = l.locker
	if l.progress != nil && (!l.reported || changed(pos, l.last)) {
		l.progress(pos)
		l.reported, l.last = true, pos
	}
}

// scan reads what a look needs: for WaitAhead the nearest within+1
// tickets that count ahead of ours (its mover among them), else the queue.
func (l *waitLoop) scan() (*snapshot, error) {
	if l.placeOnly {
		return l.w.q.scanAhead(l.w.e.Seq, l.within+1)
	}
	return l.w.q.scanFor(l.w.scanSeq())
}

// place is our place in snap. WaitAhead watches nothing but the tickets
// ahead, so it does not look for the holder: a read of the host's lock
// table per look, while a sweep queues.
func (l *waitLoop) place(snap *snapshot) (ahead []entry, holder *Ticket) {
	if l.placeOnly {
		return l.w.mustPass(snap), nil
	}
	ahead, h := l.w.place(snap)
	if h != nil {
		t := h.Ticket
		holder = &t
		if l.progress != nil || len(ahead) == 0 || l.ctx.Err() != nil {
			// What it is shown to, or what a timeout names.
			t.Keeping = l.w.q.keepingOf(h)
		}
	}
	return ahead, holder
}

// mover is the index in ahead of the ticket whose going moves a quiet
// waiter to where it waits for: the one directly ahead, or for WaitAhead
// the one that leaves within tickets between us.
func (l *waitLoop) mover(ahead []entry) int {
	if l.placeOnly {
		return len(ahead) - 1 - l.within
	}
	return len(ahead) - 1
}

// cancel removes the ticket of a Wait that failed; a WaitAhead leaves it
// to whoever adopts it next.
func (l *waitLoop) cancel() {
	if !l.placeOnly {
		l.w.Cancel()
	}
}

// take runs when we are first in line and no live ticket claims the token
// (a holder that released removes its ticket before it unlocks; a live
// granted ticket whose owner lacks the lock means the token file was
// replaced under it: never become a second holder). When the lock is
// someone else's, locker is the process /proc/locks names, to watch.
func (l *waitLoop) take() (g Grant, locker []proc.Ident, done bool, err error) {
	w := l.w
	got, err := w.q.tryLock(l.tok)
	if err == nil {
		l.ev.watchToken(w.q, l.tok)
	}
	if err != nil {
		w.Cancel()
		return nil, nil, true, err
	}
	if got {
		g, err := w.grant(l.tok)
		if errors.Is(err, errGaveWay) {
			return nil, nil, false, w.q.reopenAfterGiveWay(l.tok)
		}
		l.granted = err == nil
		return g, nil, true, err
	}
	// Held by someone with no valid ticket: most often the holder that
	// has just removed its ticket and not yet unlocked, whose close of
	// the token wakes us. Held still at the next look (one taking the
	// token, or not gpu-hold at all), the process /proc/locks names is
	// watched, and named (wait_locker.go); a read of it after a quiet
	// moment sleeps for an RCU grace period (milliseconds), too long for
	// every hand-off. A backoff re-checks besides.
	if l.lockedAway++; l.lockedAway > 1 {
		if lk := l.lockedBy(); lk != nil && !lk.Gone {
			locker = append(locker, lk.Process)
		}
	}
	return nil, locker, false, nil
}

// watchQueue watches our ticket and the one directly ahead when quiet,
// else the whole queue and the token. It reports whether it added a
// watch, so that the caller looks again before sleeping.
func (l *waitLoop) watchQueue(ahead []entry, quiet bool) bool {
	w := l.w
	if quiet {
		last := &ahead[l.mover(ahead)]
		return l.ev.watchTickets(w.q, watchedTicket{w.e.name, w.e.dev, w.e.ino}, watchedTicket{last.name, last.dev, last.ino})
	}
	return l.ev.watchAll(w.q, l.tok)
}

// sleep watches the pids in watch and waits for an event, no later than
// ctx's deadline. When unsure (a lock nobody's ticket explains, a pid it
// could not watch, events that may be lost) it wakes on a growing backoff
// too.
func (l *waitLoop) sleep(watch []proc.Ident, unsure bool) error {
	if l.ev.watchPids(watch) {
		unsure = true
	}
	timeout := time.Duration(-1)
	if dl, ok := l.ctx.Deadline(); ok {
		timeout = max(time.Until(dl), 0)
	}
	ceiling := time.Second
	if l.ev.degraded() {
		unsure, ceiling = true, degradedRecheck
	}
	if unsure {
		l.backoff = min(max(2*l.backoff, 5*time.Millisecond), ceiling)
		if timeout < 0 || l.backoff < timeout {
			timeout = l.backoff
		}
	} else {
		l.backoff = 0
	}
	return l.ev.wait(timeout)
}

func changed(a, b Position) bool {
	if a.Ahead != b.Ahead || (a.Holder == nil) != (b.Holder == nil) || (a.Locker == nil) != (b.Locker == nil) {
		return true
	}
	if a.Locker != nil && !a.Locker.same(b.Locker) {
		return true
	}
	return a.Holder != nil && (a.Holder.Seq != b.Holder.Seq || keepLine(a.Holder) != keepLine(b.Holder))
}

// keepLine is what t's holder keeps the token for ("": nothing).
func keepLine(t *Ticket) string {
	if t.Keeping == nil {
		return ""
	}
	return t.Keeping.Line()
}

// giveUp removes the ticket when ctx ended: a *WaitTimeout for a deadline.
// locker (may be nil) is what held the token up.
func (w *waiter) giveUp(ctx context.Context, start time.Time, holder *Ticket, locker *Locker) error {
	w.Cancel()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &WaitTimeout{Waited: time.Since(start), Holder: holder, Locker: locker}
	}
	return ctx.Err()
}

// removed reports whether our ticket file is gone or is no longer ours.
func (w *waiter) removed() bool {
	var st unix.Stat_t
	if err := unix.Fstatat(w.q.fd, w.e.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return errors.Is(err, unix.ENOENT)
	}
	return st.Dev != w.e.dev || st.Ino != w.e.ino
}

// drop forgets a ticket someone else removed (its name is not ours now).
func (w *waiter) drop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fd >= 0 {
		unix.Close(w.fd)
		w.fd = -1
	}
}

// Cancel removes the ticket; it is idempotent.
func (w *waiter) Cancel() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fd < 0 {
		return nil
	}
	err := w.q.removeIfSame(w.e.name, w.e.dev, w.e.ino)
	unix.Close(w.fd)
	w.fd = -1
	return err
}

// tryNow takes the token at once when nobody is ahead and it is free,
// without setting up inotify: closing an inotify fd costs an RCU grace
// period, which an uncontended hold would otherwise pay at its exit. done
// says whether Wait is over (granted, or failed in grant).
func (w *waiter) tryNow() (g Grant, done bool, err error) {
	if w.removed() {
		return nil, false, nil // the loop reports it
	}
	snap, err := w.q.scanFor(w.scanSeq())
	if err != nil {
		return nil, false, nil // the loop reports it
	}
	if ahead, h := w.place(snap); len(ahead) > 0 || h != nil {
		return nil, false, nil
	}
	tok, err := w.q.openToken()
	if err != nil {
		return nil, false, nil
	}
	if got, err := w.q.tryLock(tok); err != nil || !got {
		tok.close()
		return nil, false, nil
	}
	g, err = w.grant(tok) // closes tok itself when it fails
	if errors.Is(err, errGaveWay) {
		tok.close()
		return nil, false, nil
	}
	return g, true, err
}

// grant runs with the token held: it collects the dead holders, tidies
// what dead processes left, and marks our ticket granted.
func (w *waiter) grant(tok *tokenLock) (Grant, error) {
	if w.removed() {
		tok.close()
		w.drop()
		return nil, ErrRemoved
	}
	snap, err := w.q.scanFor(w.scanSeq())
	if err != nil {
		tok.close()
		w.Cancel()
		return nil, err
	}
	if err := w.giveWay(snap); err != nil {
		return nil, err // tok stays open, and locked: the caller lets it go
	}
	dead := snap.deadWhileHeld(w.q, w.e.Seq)
	w.q.cleanup(snap)
	t := w.e.Ticket
	t.Granted = time.Now()
	b, _ := json.Marshal(t)
	// The granted ticket replaces the waiting one; it is locked before it
	// is visible, and the old one stays locked until it is replaced.
	fd, st, err := w.q.publish(w.e.name, append(b, '\n'), false)
	if err != nil {
		tok.close()
		w.Cancel()
		return nil, err
	}
	w.mu.Lock()
	unix.Close(w.fd)
	w.fd = -1
	w.mu.Unlock()
	return &grant{q: w.q, e: entry{Ticket: t, name: w.e.name, dev: st.Dev, ino: st.Ino, live: true}, fd: fd, tok: tok, dead: dead}, nil
}
