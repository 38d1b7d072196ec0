// head_test.go checks the at-head notice: a waiter with a ticket ahead of
// it is not told, and is told once when the ticket ahead of it takes the
// token, while the token is still held.
package queue

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestHeadNoticeWhileTokenHeld(t *testing.T) {
	q := openQ(t, t.TempDir(), "gpu")
	a := take(t, q, "a")
	w1, err := q.Enqueue(Ticket{Label: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	w2, err := q.Enqueue(Ticket{Label: "w2"})
	if err != nil {
		t.Fatal(err)
	}
	var told atomic.Int32
	headAt := make(chan struct{}, 1)
	g1c := make(chan Grant, 1)
	g2c := make(chan Grant, 1)
	go func() { g, _ := w1.Wait(ctxT(t, 20*time.Second), nil); g1c <- g }()
	go func() {
		ctx := WithHeadNotice(ctxT(t, 20*time.Second), func() { told.Add(1); headAt <- struct{}{} })
		g, _ := w2.Wait(ctx, nil)
		g2c <- g
	}()
	select {
	case <-headAt:
		t.Fatal("w2 was told it is at the head with w1 ahead of it")
	case <-time.After(300 * time.Millisecond):
	}
	a.Release()
	g1 := <-g1c
	if g1 == nil {
		t.Fatal("w1 got no grant")
	}
	select {
	case <-headAt:
	case <-time.After(10 * time.Second):
		t.Fatal("w2 was never told it is at the head while w1 holds the token")
	}
	select {
	case g := <-g2c:
		t.Fatalf("w2 was granted %v while w1 holds the token", g.Ticket())
	default:
	}
	g1.Release()
	g2 := <-g2c
	if g2 == nil {
		t.Fatal("w2 got no grant")
	}
	g2.Release()
	if n := told.Load(); n != 1 {
		t.Fatalf("w2 was told %d times, want once", n)
	}
}
