// etcdq_test.go tests the backend against a real etcd (internal/etcdserver
// in a process of its own): FIFO by create revision, a budget of K,
// cancel, status, the token lost when its key is deleted or etcd stops
// answering, and a dead holder handed to its successor on the same host
// only.
package etcdq

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/etcdtest"
	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/queue"
)

func TestMain(m *testing.M) {
	code := m.Run()
	etcdtest.Cleanup()
	os.Exit(code)
}

func open(t *testing.T, s *etcdtest.Server, prefix string, budget int, host string) *Queue {
	t.Helper()
	var c Config
	if err := c.ParseURL(s.URL(prefix)); err != nil {
		t.Fatal(err)
	}
	c.Budget, c.TTLSec, c.Host = budget, 4, host
	q, err := Open(c, "gpu", func(m string) { t.Log("warn: " + m) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return q
}

func ticket(label string) queue.Ticket {
	self, _ := proc.Self()
	return queue.Ticket{Label: label, Holder: self, UID: os.Getuid(), Host: "h1", Created: time.Now()}
}

func enqueue(t *testing.T, q *Queue, label string) queue.Waiter {
	t.Helper()
	w, err := q.Enqueue(ticket(label))
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// grantAsync waits for w's grant in the background.
func grantAsync(w queue.Waiter) chan queue.Grant {
	c := make(chan queue.Grant, 1)
	go func() {
		g, err := w.Wait(context.Background(), nil)
		if err != nil {
			close(c)
			return
		}
		c <- g
	}()
	return c
}

func notYet(t *testing.T, c chan queue.Grant, what string) {
	t.Helper()
	select {
	case <-c:
		t.Fatalf("%s was granted while the budget was full", what)
	case <-time.After(300 * time.Millisecond):
	}
}

func got(t *testing.T, c chan queue.Grant, what string) queue.Grant {
	t.Helper()
	select {
	case g, ok := <-c:
		if !ok {
			t.Fatalf("%s: wait failed", what)
		}
		return g
	case <-time.After(20 * time.Second):
		t.Fatalf("%s never granted", what)
	}
	return nil
}

func TestFIFOBudgetOne(t *testing.T) {
	s := etcdtest.Start(t)
	q := open(t, s, "/fifo", 1, "h1")
	a, b, c := enqueue(t, q, "a"), enqueue(t, q, "b"), enqueue(t, q, "c")
	if !(a.Ticket().Seq < b.Ticket().Seq && b.Ticket().Seq < c.Ticket().Seq) {
		t.Fatalf("seqs not increasing: %d %d %d", a.Ticket().Seq, b.Ticket().Seq, c.Ticket().Seq)
	}
	ga := got(t, grantAsync(a), "a")
	cb, cc := grantAsync(b), grantAsync(c)
	notYet(t, cb, "b")
	st, err := q.Status()
	if err != nil || st.Holder == nil || st.Holder.Label != "a" || len(st.Waiters) != 2 || st.Waiters[0].Label != "b" || st.Waiters[0].Host != "h1" {
		t.Fatalf("status %+v %v", st, err)
	}
	if f := ga.(queue.Fenced).Fence(); f != int64(a.Ticket().Seq) {
		t.Fatalf("fence %d, want the create revision %d", f, a.Ticket().Seq)
	}
	ga.Release()
	gb := got(t, cb, "b")
	notYet(t, cc, "c")
	gb.Release()
	got(t, cc, "c").Release()
}

// With a budget of 2, the third waits; when the SECOND of the tickets
// between goes first (a cancel), the fourth's place moves though the
// ticket two before it stays: watching only the K-th before would miss it.
func TestBudgetTwo(t *testing.T) {
	s := etcdtest.Start(t)
	q := open(t, s, "/k2", 2, "h1")
	a, b, c, d := enqueue(t, q, "a"), enqueue(t, q, "b"), enqueue(t, q, "c"), enqueue(t, q, "d")
	ga, gb := got(t, grantAsync(a), "a"), got(t, grantAsync(b), "b")
	cd := grantAsync(d)
	notYet(t, cd, "d")
	if err := q.Cancel(c.Ticket().Seq, os.Getuid()); err != nil {
		t.Fatal(err)
	}
	notYet(t, cd, "d")
	ga.Release()
	gd := got(t, cd, "d")
	st, _ := q.Status()
	if st.Holder == nil || st.Holder.Label != "b" || len(st.Holders) != 1 || st.Holders[0].Label != "d" {
		t.Fatalf("status %+v", st)
	}
	gb.Release()
	gd.Release()
}

func TestCancel(t *testing.T) {
	s := etcdtest.Start(t)
	q := open(t, s, "/cancel", 1, "h1")
	a, b := enqueue(t, q, "a"), enqueue(t, q, "b")
	ga := got(t, grantAsync(a), "a")
	if err := q.Cancel(a.Ticket().Seq, 0); !errors.Is(err, queue.ErrHolding) {
		t.Fatalf("cancel of the holder: %v", err)
	}
	if err := q.Cancel(b.Ticket().Seq, 4242); !errors.Is(err, queue.ErrNotOwner) {
		t.Fatalf("cancel by another uid: %v", err)
	}
	werr := make(chan error, 1)
	go func() { _, err := b.Wait(context.Background(), nil); werr <- err }()
	time.Sleep(100 * time.Millisecond)
	if err := q.Cancel(b.Ticket().Seq, os.Getuid()); err != nil {
		t.Fatal(err)
	}
	if err := <-werr; !errors.Is(err, queue.ErrRemoved) {
		t.Fatalf("cancelled waiter: %v", err)
	}
	ga.Release()
}

func TestLostWhenKeyDeleted(t *testing.T) {
	s := etcdtest.Start(t)
	q := open(t, s, "/lostkey", 1, "h1")
	g := got(t, grantAsync(enqueue(t, q, "a")), "a")
	ctx, cancel := q.ctx(nil)
	defer cancel()
	if _, err := q.cli.Delete(ctx, g.(*grant).w.key); err != nil {
		t.Fatal(err)
	}
	select {
	case li := <-g.(queue.Fenced).Lost():
		if !strings.Contains(li.Reason, "deleted") {
			t.Fatalf("reason %q", li.Reason)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("deleting the ticket's key did not lose the token")
	}
	g.Release()
}

func TestLostWhenEtcdStops(t *testing.T) {
	s := etcdtest.Start(t)
	q := open(t, s, "/loststop", 1, "h1")
	g := got(t, grantAsync(enqueue(t, q, "a")), "a")
	s.Kill()
	select {
	case li := <-g.(queue.Fenced).Lost():
		t.Logf("lost: %s", li.Reason)
	case <-time.After(10 * time.Second):
		t.Fatal("etcd gone: the token was never lost")
	}
	g.Release()
}

func TestUnreachable(t *testing.T) {
	var c Config
	c.ParseURL("etcd://127.0.0.1:1/none")
	c.ConnectTimeout = 500 * time.Millisecond
	q, err := Open(c, "gpu", nil)
	if err == nil {
		_, err = q.Enqueue(ticket("x"))
	}
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("got %v, want ErrUnreachable", err)
	}
}

// A holder that died holding (its lease gone, its held key left) is
// handed to the next holder on its host only.
func TestDeadHolderSameHostOnly(t *testing.T) {
	s := etcdtest.Start(t)
	for _, host := range []string{"h1", "h2"} {
		t.Run(host, func(t *testing.T) {
			q := open(t, s, "/dead-"+host, 1, host)
			a := enqueue(t, q, "a")
			ga := got(t, grantAsync(a), "a").(*grant)
			// Die holding: the lease goes, the held key stays.
			dead := ga.w.t
			dead.Holder = proc.Ident{PID: 1 << 30, Start: 1}
			ctx, cancel := q.ctx(nil)
			defer cancel()
			q.cli.Put(ctx, q.heldKey(ga.rev), encode(dead))
			close(ga.stop)
			ga.w.s.close(time.Second)
			gb := got(t, grantAsync(enqueue(t, q, "b")), "b")
			st, _ := q.Status()
			if len(st.Dead) != 1 {
				t.Fatalf("status shows %d dead, want 1", len(st.Dead))
			}
			if host == "h1" {
				if d := gb.Dead(); len(d) != 1 || d[0].Seq != a.Ticket().Seq {
					t.Fatalf("dead handed over: %+v", d)
				}
				if err := gb.Reaped(gb.Dead()[0]); err != nil {
					t.Fatal(err)
				}
				if st, _ := q.Status(); len(st.Dead) != 0 {
					t.Fatalf("reaped, still dead: %+v", st.Dead)
				}
			} else if len(gb.Dead()) != 0 {
				t.Fatalf("another host's dead holder handed over: %+v", gb.Dead())
			}
			gb.Release()
		})
	}
}

// The first hold's budget is the fleet's: a hold that names another is
// refused (it could let more holders in than the others allow), and one
// that names none takes it.
func TestBudgetAgreed(t *testing.T) {
	s := etcdtest.Start(t)
	q2 := open(t, s, "/agree", 2, "h1")
	w := enqueue(t, q2, "a")
	defer w.Cancel()
	q1 := open(t, s, "/agree", 1, "h1")
	if _, err := q1.Enqueue(ticket("b")); err == nil || !strings.Contains(err.Error(), "budget") {
		t.Fatalf("a hold naming budget 1 where the fleet's is 2: %v", err)
	}
	var c Config
	c.ParseURL(s.URL("/agree"))
	c.TTLSec = 4
	q, err := Open(c, "gpu", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	w2, err := q.Enqueue(ticket("c"))
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Cancel()
	if q.cfg.Budget != 2 {
		t.Fatalf("a hold naming no budget has %d, want the fleet's 2", q.cfg.Budget)
	}
}
