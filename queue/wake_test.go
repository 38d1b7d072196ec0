// wake_test.go covers what a hand-off costs the rest of the queue: only the
// waiters it can move wake, and a waiter's scan does not re-read the
// tickets behind it, yet never misses one of them taking the token.
package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/proc"
)

// settled waits until no handle's wake count moved for 200 ms and returns
// the counts.
func settled(t *testing.T, qs []*testQueue) []int64 {
	t.Helper()
	read := func() []int64 {
		out := make([]int64, len(qs))
		for i, q := range qs {
			out[i] = q.wakes.Load()
		}
		return out
	}
	last, since := read(), time.Now()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		now := read()
		if fmt.Sprint(now) != fmt.Sprint(last) {
			last, since = now, time.Now()
			continue
		}
		if time.Since(since) >= 200*time.Millisecond {
			return now
		}
	}
	t.Fatalf("the waiters never settled: wake counts still moving (%v)", last)
	return nil
}

// chain is n waiters, each on a queue handle of its own, queued in order
// (labels "0".."n-1") behind a holder.
type chain struct {
	qs     []*testQueue
	grants chan Grant
	errs   chan error
	ctx    context.Context
}

// newChain queues the holder and the n waiters and returns the holder's
// grant.
func newChain(t *testing.T, n int) (*chain, Grant) {
	t.Helper()
	dir := t.TempDir()
	g := take(t, openQ(t, dir, "gpu"), "holder")
	c := &chain{qs: make([]*testQueue, n), grants: make(chan Grant, n), errs: make(chan error, n), ctx: ctxT(t, 30*time.Second)}
	for i := range c.qs {
		c.qs[i] = openQ(t, dir, "gpu")
		w, err := c.qs[i].Enqueue(Ticket{Label: fmt.Sprint(i)})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			g, err := w.Wait(c.ctx, nil)
			if err != nil {
				c.errs <- err
				return
			}
			c.grants <- g
		}()
	}
	return c, g
}

// handOff releases g and returns the next grant, which must be waiter
// want's.
func (c *chain) handOff(t *testing.T, g Grant, want int) Grant {
	t.Helper()
	if err := g.Release(); err != nil {
		t.Fatal(err)
	}
	select {
	case g = <-c.grants:
	case err := <-c.errs:
		t.Fatal(err)
	case <-c.ctx.Done():
		t.Fatalf("no waiter got the token released for waiter %d", want)
	}
	if g.Ticket().Label != fmt.Sprint(want) {
		t.Fatalf("waiter %s got the token, want %d", g.Ticket().Label, want)
	}
	return g
}

// TestHandOffWakesOnlyWhomItMoves: with eight waiters queued, a hand-off
// wakes the first in line (the release moves it) and the second (the grant
// makes it first), and no one behind them. A queue whose every waiter
// watches the whole directory wakes all eight on each release and grant:
// with dozens queued, that is milliseconds of CPU on the hand-off's path.
func TestHandOffWakesOnlyWhomItMoves(t *testing.T) {
	const n = 8
	c, g := newChain(t, n)
	before := settled(t, c.qs)
	g = c.handOff(t, g, 0)
	after := settled(t, c.qs)
	if after[0] == before[0] {
		t.Errorf("the first waiter got the token without waking (counts %v -> %v): the count is broken", before, after)
	}
	for i := 2; i < n; i++ {
		if after[i] != before[i] {
			t.Errorf("waiter %d woke %d times on a hand-off that cannot move it (wakes %v -> %v)", i, after[i]-before[i], before, after)
		}
	}
	// The rest of the chain still runs in order.
	for i := 1; i < n; i++ {
		g = c.handOff(t, g, i)
	}
	g.Release()
}

// TestScanForSeesATicketBehindTakeTheToken: a waiter's scan takes the
// waiting tickets behind it from its earlier reading, unprobed; a ticket
// behind it that is replaced by a granted one (a reaper's, say) is read
// again, so the waiter sees the holder; a full scan reads everything.
func TestScanForSeesATicketBehindTakeTheToken(t *testing.T) {
	dir := t.TempDir()
	q := openQ(t, dir, "gpu")
	wa, err := q.Enqueue(Ticket{Label: "a"})
	if err != nil {
		t.Fatal(err)
	}
	wb, err := q.Enqueue(Ticket{Label: "b"})
	if err != nil {
		t.Fatal(err)
	}
	a, b := wa.(*waiter), wb.(*waiter)
	s, err := q.scanFor(a.e.Seq)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.tickets) != 2 || s.tickets[1].unprobed {
		t.Fatalf("first scan: %+v, want both tickets, b read", s.tickets)
	}
	s, _ = q.scanFor(a.e.Seq)
	if !s.tickets[1].unprobed || !s.tickets[1].live {
		t.Errorf("second scan: b %+v, want it from the first reading (unprobed, counted live)", s.tickets[1])
	}
	if h := s.holder(q.dirQueue); h != nil {
		t.Fatalf("holder %+v before anyone took the token", h)
	}

	// b's ticket is replaced by a granted one, as a grant publishes it:
	// with the token taken first.
	tok, err := q.openToken()
	if err != nil {
		t.Fatal(err)
	}
	defer tok.close()
	if got, err := q.tryLock(tok); !got || err != nil {
		t.Fatalf("taking the token: %v %v", got, err)
	}
	tk := b.e.Ticket
	tk.Granted = time.Now()
	js, _ := json.Marshal(tk)
	fd, _, err := q.publish(b.e.name, append(js, '\n'), false)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	s, err = q.scanFor(a.e.Seq)
	if err != nil {
		t.Fatal(err)
	}
	if h := s.holder(q.dirQueue); h == nil || h.Seq != b.e.Seq {
		t.Fatalf("after b's ticket was granted, holder %+v, want b (ticket %d)", h, b.e.Seq)
	}
	full, _ := q.scan()
	for _, e := range full.tickets {
		if e.unprobed {
			t.Errorf("a full scan left ticket %d unprobed", e.Seq)
		}
	}
}

// TestTicketWatchesRefusedFallBack: when a waiter cannot watch single
// tickets (out of inotify watches: here every other watch is refused, so
// one of a waiter's two ticket watches is set and the other not), it
// watches the directory with a filter on the names that matter instead:
// the chain still runs in order, and no waiter spins while it waits.
func TestTicketWatchesRefusedFallBack(t *testing.T) {
	var calls atomic.Int64
	watchTicket = func(fd int, path string, mask uint32) (int, error) {
		if calls.Add(1)%2 == 0 {
			return -1, unix.ENOSPC
		}
		return unix.InotifyAddWatch(fd, path, mask)
	}
	defer func() { watchTicket = unix.InotifyAddWatch }()
	const n = 4
	c, g := newChain(t, n)
	settled(t, c.qs)
	var before, after unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &before)
	time.Sleep(300 * time.Millisecond)
	unix.Getrusage(unix.RUSAGE_SELF, &after)
	if used := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano()); used > 100*time.Millisecond {
		t.Errorf("the waiting queue used %v of CPU in 300 ms: a waiter spins", used)
	}
	for i := 0; i < n; i++ {
		g = c.handOff(t, g, i)
	}
	g.Release()
}

// TestLeavingHolderCostsNoLockTable: a waiter first in line that finds the
// token locked with no ticket behind the lock (a holder that has removed
// its ticket and not yet unlocked, the instant of every hand-off) waits
// for the token's close, without reading /proc/locks, whose read waits for
// an RCU grace period; locked still at the next look, the locker it names
// (here, this process) is watched.
func TestLeavingHolderCostsNoLockTable(t *testing.T) {
	q := openQ(t, t.TempDir(), "gpu")
	leaving, err := q.openToken()
	if err != nil {
		t.Fatal(err)
	}
	defer leaving.close()
	if err := unix.Flock(leaving.fd, unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	w, err := q.Enqueue(Ticket{Label: "waiter"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Cancel()
	l, err := w.(*waiter).watchLoop(ctxT(t, 10*time.Second), nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	self, err := proc.Self()
	if err != nil {
		t.Fatal(err)
	}
	for look, want := range [][]proc.Ident{nil, {self}} {
		g, locker, done, err := l.take()
		if g != nil || done || err != nil || !slices.Equal(locker, want) {
			t.Fatalf("look %d: grant %v, done %v, %v, locker %v: want none taken and locker %v", look+1, g, done, err, locker, want)
		}
	}
}
