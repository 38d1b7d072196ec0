// yield.go owns yielding tickets (Ticket.Yield): the place of a waiter
// when some tickets yield, the giving way of a yielding waiter that took
// the token while a ticket that does not yield waits, and the watch that
// tells a yielding holder (Contender) that such a ticket queued.
//
// The flag is read from a ticket file, which its owner wrote, so it changes
// only that ticket's own treatment: a yielding ticket is passed over by
// the tickets that do not yield. Nothing in the directory ends a holder:
// a yielding holder ends itself, from its own in-memory ticket, when a
// ticket that counts (a well-formed, live ticket file of its owner's uid,
// as scan checks) waits without yielding.
package queue

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// errGaveWay: a yielding waiter took the token while a ticket that does
// not yield waited, and let it go again.
var errGaveWay = errors.New("a ticket that does not yield is waiting")

// realWaiting lists the live waiting tickets but me that do not yield.
func (s *snapshot) realWaiting(me uint64) []entry {
	var out []entry
	for _, e := range s.tickets {
		if e.live && !e.granted() && !e.Yield && e.Seq != me {
			out = append(out, e)
		}
	}
	return out
}

// place is what the waiter must let go first (mustPass), and the holder.
func (w *waiter) place(s *snapshot) (ahead []entry, holder *entry) {
	return w.mustPass(s), s.holder(w.q)
}

// mustPass is what the waiter must let go first. A waiter that does not
// yield passes over the yielding tickets ahead of it; a yielding one
// waits, besides the tickets ahead of it, for every ticket that does not
// yield, wherever it is in the queue, and, on a pool's device, for the
// pool's waiting tickets (any of them may need it).
func (w *waiter) mustPass(s *snapshot) []entry {
	ahead := s.waitingAhead(w.e.Seq)
	if w.e.Yield {
		return append(append(ahead, s.realWaiting(w.e.Seq)...), w.q.poolWaiting()...)
	}
	kept := ahead[:0]
	for _, e := range ahead {
		if !e.Yield {
			kept = append(kept, e)
		}
	}
	return kept
}

// scanSeq is the ticket scanFor reads the queue for. A yielding waiter
// depends on the tickets behind it too, so it reads and probes them all.
func (w *waiter) scanSeq() uint64 {
	if w.e.Yield {
		return 0
	}
	return w.e.Seq
}

// giveWay runs in grant with the token locked: a yielding waiter that
// finds a ticket that does not yield (one that queued between its look and
// its lock) unlocks the token and reports errGaveWay.
func (w *waiter) giveWay(s *snapshot) error {
	if !w.e.Yield || len(s.realWaiting(w.e.Seq)) == 0 {
		return nil
	}
	return errGaveWay
}

// reopenAfterGiveWay closes and reopens the token after giving way: the
// close is what wakes the waiter that does not yield (inotify
// IN_CLOSE_NOWRITE), which an unlock alone would not.
func (q *dirQueue) reopenAfterGiveWay(tl *tokenLock) error {
	tl.close()
	n, err := q.openToken()
	if err != nil {
		return err
	}
	*tl = *n
	return nil
}

// contention watches the queue for a yielding holder.
type contention struct {
	ch   chan struct{} // closed once a ticket that does not yield waits
	stop context.CancelFunc
	done chan struct{}
}

// Contended implements Contender: nil unless our ticket yields.
func (g *grant) Contended() <-chan struct{} {
	if !g.e.Yield || g.detached {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.yield == nil {
		g.yield = g.q.watchContention(g.e.Seq)
	}
	return g.yield.ch
}

// end stops the watch (Release); nil-safe.
func (c *contention) end() {
	if c == nil {
		return
	}
	c.stop()
	<-c.done
}

// watchContention starts the watch for holder ticket me: of its queue's
// directory and, on a pool's device, of the pool's.
func (q *dirQueue) watchContention(me uint64) *contention {
	ctx, cancel := context.WithCancel(context.Background())
	c := &contention{ch: make(chan struct{}), stop: cancel, done: make(chan struct{})}
	var wg sync.WaitGroup
	var once sync.Once
	fire := func() { once.Do(func() { close(c.ch) }) }
	dirs := []*dirQueue{q}
	if pq := q.poolOf(); pq != nil {
		dirs = append(dirs, pq)
	}
	for _, d := range dirs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.run(ctx, d, func() bool { return q.contended(me) }, fire)
		}()
	}
	go func() {
		wg.Wait()
		for _, d := range dirs[1:] {
			d.Close()
		}
		close(c.done)
	}()
	return c
}

// run looks at the queue on every event in d's directory (inotify:
// tickets appearing and renamed into place; an overflow) until contended
// says a ticket that does not yield waits, or the watch is stopped.
// inotify is set up before the first look, so no ticket queues unseen.
func (c *contention) run(ctx context.Context, q *dirQueue, contended func() bool, fire func()) {
	ev, err := newEvents(q)
	if err != nil {
		q.warnf("contention", "cannot watch %s for tickets (%v): this yielding hold re-checks the queue every %v", q.path, err, degradedRecheck)
	} else {
		stop := context.AfterFunc(ctx, ev.kickNow)
		defer func() { stop(); ev.close() }()
	}
	for ctx.Err() == nil {
		if contended() {
			fire()
			c.stop() // the other directory's watch too
			return
		}
		if ev == nil || ev.degraded() {
			c.pause(ctx, ev)
			continue
		}
		if err := ev.wait(-1); err != nil {
			c.pause(ctx, nil)
		}
	}
}

// pause waits degradedRecheck (or for ctx), for a watch without inotify.
func (c *contention) pause(ctx context.Context, ev *events) {
	if ev != nil {
		ev.wait(degradedRecheck)
		return
	}
	t := time.NewTimer(degradedRecheck)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// contended reports whether a ticket that does not yield waits, besides
// holder ticket me, here or (a pool's device) in the pool's queue. Every
// ticket is read and its lock probed.
func (q *dirQueue) contended(me uint64) bool {
	s, err := q.scan()
	if err != nil {
		q.warnf("contention-scan", "cannot read %s to see whether a ticket waits (%v); retrying on the next event", q.path, err)
		return false
	}
	return len(s.realWaiting(me)) > 0 || len(q.poolWaiting()) > 0
}

// poolOf opens, read-only, the pool queue whose device queue q is
// (QueueName: <pool>.d<N>); nil when q is no pool's device.
func (q *dirQueue) poolOf() *dirQueue {
	i := strings.LastIndex(q.resource, ".d")
	if i <= 0 || i+2 >= len(q.resource) || strings.Trim(q.resource[i+2:], "0123456789") != "" {
		return nil
	}
	pq, err := OpenDir(filepath.Dir(q.path), q.resource[:i], DirOptions{NoCreate: true, Warn: q.warn})
	if err != nil {
		return nil
	}
	return pq.(*dirQueue)
}

// poolWaiting lists the pool's live waiting tickets that do not yield
// (not yet running: a running one names its devices), when q is a pool's
// device.
func (q *dirQueue) poolWaiting() []entry {
	pq := q.poolOf()
	if pq == nil {
		return nil
	}
	defer pq.Close()
	s, err := pq.scan()
	if err != nil {
		return nil
	}
	var out []entry
	for _, e := range s.realWaiting(0) {
		if len(e.Devices) == 0 {
			out = append(out, e)
		}
	}
	return out
}
