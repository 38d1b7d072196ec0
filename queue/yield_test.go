// yield_test.go owns the tests of yielding tickets: a yielding waiter never
// takes the token while a ticket that does not yield waits, such a ticket
// passes over the yielding ones ahead of it, and a yielding holder's
// Contended fires when such a ticket queues (and never for a holder that
// does not yield, nor for a waiting ticket that is dead or yields).
package queue

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// waitAsync waits for w in the background; the channel gets the grant.
func waitAsync(t *testing.T, w Waiter) <-chan Grant {
	t.Helper()
	ch := make(chan Grant, 1)
	go func() {
		g, err := w.Wait(ctxT(t, 10*time.Second), nil)
		if err != nil {
			t.Errorf("Wait(%s): %v", w.Ticket().Label, err)
			close(ch)
			return
		}
		ch <- g
	}()
	return ch
}

func enqueue(t *testing.T, q Queue, label string, yield bool) Waiter {
	t.Helper()
	w, err := q.Enqueue(Ticket{Label: label, Yield: yield})
	if err != nil {
		t.Fatalf("Enqueue(%s): %v", label, err)
	}
	return w
}

// firedWithin reports whether g's Contended fired within d.
func firedWithin(g Grant, d time.Duration) bool {
	c, ok := g.(Contender)
	if !ok {
		return false
	}
	select {
	case <-c.Contended():
		return true
	case <-time.After(d):
		return false
	}
}

// A ticket that does not yield, queued behind a yielding waiter, gets the
// token first; the yielding one only once nobody else waits.
func TestYieldWaiterPassedOver(t *testing.T) {
	q := openQ(t, t.TempDir(), "gpu")
	h := take(t, q, "holder")
	y := enqueue(t, q, "keeper", true)
	r := enqueue(t, q, "job", false)
	yg, rg := waitAsync(t, y), waitAsync(t, r)
	time.Sleep(50 * time.Millisecond)
	h.Release()
	g := <-rg
	if g == nil {
		t.Fatal("the job never got the token")
	}
	select {
	case g2 := <-yg:
		t.Fatalf("the keeper (ticket %d) got the token while the job held it", g2.Ticket().Seq)
	case <-time.After(100 * time.Millisecond):
	}
	g.Release()
	if kg := <-yg; kg == nil {
		t.Fatal("the keeper never got the token once the queue was empty")
	} else {
		kg.Release()
	}
}

// A yielding waiter first in line, with the token free, does not take it
// while a ticket that does not yield waits behind it (here one blocked by
// nothing but its wait having not started yet).
func TestYieldWaiterNeverTakesWhileRealWaits(t *testing.T) {
	q := openQ(t, t.TempDir(), "gpu")
	y := enqueue(t, q, "keeper", true)
	r := enqueue(t, q, "job", false) // waits, but Wait is not called yet
	yg := waitAsync(t, y)
	select {
	case g := <-yg:
		t.Fatalf("the keeper took the token (ticket %d) while the job's ticket waited", g.Ticket().Seq)
	case <-time.After(200 * time.Millisecond):
	}
	r.Cancel() // the job gives up: the keeper may go
	select {
	case g := <-yg:
		if g == nil {
			t.Fatal("keeper's wait failed")
		}
		g.Release()
	case <-time.After(5 * time.Second):
		t.Fatal("the keeper did not take the free token once nobody else waited")
	}
}

// Contended fires for a yielding holder when a ticket that does not yield
// queues, not when a yielding one does; it never fires for a holder that
// does not yield.
func TestContended(t *testing.T) {
	t.Run("yielding holder", func(t *testing.T) {
		q := openQ(t, t.TempDir(), "gpu")
		w := enqueue(t, q, "keeper", true)
		g, err := w.Wait(ctxT(t, 5*time.Second), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer g.Release()
		if firedWithin(g, 50*time.Millisecond) {
			t.Fatal("Contended fired with nobody waiting")
		}
		other := enqueue(t, q, "keeper2", true)
		defer other.Cancel()
		if firedWithin(g, 100*time.Millisecond) {
			t.Fatal("Contended fired for a yielding ticket")
		}
		job := enqueue(t, q, "job", false)
		defer job.Cancel()
		if !firedWithin(g, 5*time.Second) {
			t.Fatal("Contended did not fire when a ticket that does not yield queued")
		}
	})
	t.Run("holder that does not yield", func(t *testing.T) {
		q := openQ(t, t.TempDir(), "gpu")
		g := take(t, q, "job")
		defer g.Release()
		job := enqueue(t, q, "job2", false)
		defer job.Cancel()
		if firedWithin(g, 200*time.Millisecond) {
			t.Fatal("Contended fired for a holder that does not yield")
		}
	})
}

// A waiting ticket whose owner let go of its lock (dead) does not count.
func TestContendedIgnoresDeadTicket(t *testing.T) {
	q := openQ(t, t.TempDir(), "gpu")
	w := enqueue(t, q, "keeper", true)
	g, err := w.Wait(ctxT(t, 5*time.Second), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Release()
	job := enqueue(t, q, "job", false).(*waiter)
	// Drop the lock but keep the file: what a SIGKILLed waiter leaves.
	// The watch starts after, so it never saw the ticket alive.
	job.mu.Lock()
	unix.Close(job.fd)
	job.fd = -1
	job.mu.Unlock()
	if firedWithin(g, 200*time.Millisecond) {
		t.Fatal("Contended fired for a dead waiting ticket")
	}
}

// A serve keeper on one device of a pool (queue gpu.d0) is told when a
// pool ticket that needs devices waits, and the pool job gets the devices
// once it let go; a keeper waiting for the device does not hold the pool
// job back.
func TestYieldOnPoolDevice(t *testing.T) {
	dir := t.TempDir()
	p := openPool(t, dir, 2, false)
	d0 := openQ(t, dir, "gpu.d0")
	t.Run("holder", func(t *testing.T) {
		w := enqueue(t, d0, "keeper", true)
		g, err := w.Wait(ctxT(t, 5*time.Second), nil)
		if err != nil {
			t.Fatal(err)
		}
		_, ch := poolWait(t, p, "job", 2, 0)
		if !firedWithin(g, 5*time.Second) {
			g.Release()
			t.Fatal("the keeper on gpu.d0 was not told that a pool job waits")
		}
		g.Release()
		granted(t, ch, "job").Release()
	})
	t.Run("waiter", func(t *testing.T) {
		h := take(t, d0, "holder")
		kg := waitAsync(t, enqueue(t, d0, "keeper", true))
		_, ch := poolWait(t, p, "job", 2, 0)
		time.Sleep(100 * time.Millisecond)
		h.Release()
		pg := granted(t, ch, "job")
		select {
		case g := <-kg:
			t.Fatalf("the keeper (ticket %d) took gpu.d0 while the pool job held it", g.Ticket().Seq)
		case <-time.After(100 * time.Millisecond):
		}
		pg.Release()
		if g := <-kg; g != nil {
			g.Release()
		}
	})
}
