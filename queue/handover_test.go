// handover_test.go checks a waiting ticket kept across an exec: adopted
// by its own process it keeps its place and gets the token; another
// process's or user's ticket is never adopted, and is left as it was; the
// wait for a place in the queue wakes when the ticket that moves it is
// granted, never takes the token, and leaves the ticket when it fails.
package queue

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// enqueueH enqueues a ticket that can be handed over.
func enqueueH(t *testing.T, q Queue, label string) Handable {
	t.Helper()
	w, err := q.Enqueue(Ticket{Label: label})
	if err != nil {
		t.Fatal(err)
	}
	hw, ok := w.(Handable)
	if !ok {
		t.Fatalf("a directory queue's waiter is no Handable: %T", w)
	}
	return hw
}

func closeOnExec(t *testing.T, fd int) bool {
	t.Helper()
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	if err != nil {
		t.Fatal(err)
	}
	return flags&unix.FD_CLOEXEC != 0
}

func TestAdoptKeepsPlace(t *testing.T) {
	dir := t.TempDir()
	q := openQ(t, dir, "gpu")
	a := take(t, q, "a")
	w1 := enqueueH(t, q, "w1")
	w2 := enqueueH(t, q, "w2")
	h, err := w2.Handover()
	if err != nil {
		t.Fatal(err)
	}
	if closeOnExec(t, h.FD) {
		t.Fatal("the handed-over ticket's fd is still close-on-exec: an exec would drop its lock")
	}
	// The new image: a queue handle of its own, the same fd.
	q2 := openQ(t, dir, "gpu")
	adopted, err := Adopt(q2, h)
	if err != nil {
		t.Fatalf("Adopt of our own waiting ticket: %v", err)
	}
	if adopted.Ticket().Seq != w2.Ticket().Seq || !closeOnExec(t, h.FD) {
		t.Fatalf("adopted ticket %d (want %d), close-on-exec %v (want set again)", adopted.Ticket().Seq, w2.Ticket().Seq, closeOnExec(t, h.FD))
	}
	if adopted.EnqueuedWithin(1) {
		t.Fatal("adopted ticket: enqueued within 1 ticket, want false (its image did not count them)")
	}
	if err := adopted.WaitAhead(ctxT(t, 10*time.Second), 1); err != nil {
		t.Fatalf("adopted ticket: waiting until at most 1 ahead (w1 is): %v", err)
	}
	a.Release()
	g1, err := w1.Wait(ctxT(t, 10*time.Second), nil)
	if err != nil {
		t.Fatal(err)
	}
	g1.Release()
	g2, err := adopted.Wait(ctxT(t, 10*time.Second), nil)
	if err != nil {
		t.Fatalf("the adopted ticket never got the token: %v", err)
	}
	g2.Release()
}

func TestAdoptRemoved(t *testing.T) {
	q := openQ(t, t.TempDir(), "gpu")
	a := take(t, q, "a")
	defer a.Release()
	w := enqueueH(t, q, "w")
	h, err := w.Handover()
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Cancel(h.Seq, os.Getuid()); err != nil {
		t.Fatal(err)
	}
	if _, err := Adopt(openQ(t, filepath.Dir(q.path), "gpu"), h); !errors.Is(err, ErrRemoved) {
		t.Fatalf("Adopt of a cancelled ticket: %v, want ErrRemoved", err)
	}
}

// A process that is not the ticket's holder never adopts it, even with an
// fd on its file: not another process's of the same user, nor another
// user's; the ticket stays, live.
func TestAdoptRefusesOthersTickets(t *testing.T) {
	dir := sharedDir(t)
	if err := os.Mkdir(filepath.Join(dir, "gpu"), 0o1777); err != nil {
		t.Fatal(err)
	}
	unix.Chmod(filepath.Join(dir, "gpu"), 0o1777)
	q := openQ(t, dir, "gpu")
	a := take(t, q, "a")
	defer a.Release()
	for _, o := range []helperOpts{{label: "same-uid"}, {uid: 65534, label: "nobody"}} {
		h := startHelper(t, "enqueue", dir, "gpu", o)
		seq := h.seq("ticket")
		fd, err := unix.Open(filepath.Join(q.path, ticketName(seq)), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Adopt(q, Handover{FD: fd, Seq: seq})
		if err == nil || !strings.Contains(err.Error(), "not this process's") {
			t.Fatalf("%s: Adopt of another process's ticket: %v, want refused", o.label, err)
		}
		unix.Close(fd)
		st, err := q.Status()
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Waiters) != 1 || st.Waiters[0].Seq != seq {
			t.Fatalf("%s: after the refused adoption the waiters are %v, want its ticket %d alone", o.label, st.Waiters, seq)
		}
		h.finish()
	}
}

// WaitAhead(1) with two tickets ahead returns when the first of them is
// granted (the queue's quiet wake-up watches that one, not the one
// directly ahead), without the token, its ticket in place.
func TestWaitAheadWakesAtTheGrantAhead(t *testing.T) {
	q := openQ(t, t.TempDir(), "gpu")
	a := take(t, q, "a")
	w1 := enqueueH(t, q, "w1")
	w2 := enqueueH(t, q, "w2")
	w3 := enqueueH(t, q, "w3")
	done := make(chan error, 1)
	go func() { done <- w3.WaitAhead(ctxT(t, 20*time.Second), 1) }()
	select {
	case err := <-done:
		t.Fatalf("WaitAhead(1) returned (%v) with two tickets ahead", err)
	case <-time.After(300 * time.Millisecond):
	}
	a.Release()
	g1, err := w1.Wait(ctxT(t, 10*time.Second), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g1.Release()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("WaitAhead: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WaitAhead(1) did not wake when the ticket two ahead was granted")
	}
	st, err := q.Status()
	if err != nil {
		t.Fatal(err)
	}
	if st.Holder == nil || st.Holder.Seq != w1.Ticket().Seq || len(st.Waiters) != 2 || st.Waiters[1].Seq != w3.Ticket().Seq {
		t.Fatalf("after WaitAhead: holder %v, waiters %v; want w1 holding, w2 and w3 waiting", st.Holder, st.Waiters)
	}
	w2.Cancel()
	w3.Cancel()
}

func TestWaitAheadLeavesTicketWhenItEnds(t *testing.T) {
	q := openQ(t, t.TempDir(), "gpu")
	a := take(t, q, "a")
	defer a.Release()
	w1 := enqueueH(t, q, "w1")
	defer w1.Cancel()
	w2 := enqueueH(t, q, "w2")
	defer w2.Cancel()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := w2.WaitAhead(ctx, 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitAhead past its deadline: %v", err)
	}
	st, err := q.Status()
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Waiters) != 2 || st.Waiters[1].Seq != w2.Ticket().Seq {
		t.Fatalf("waiters after WaitAhead ended: %v; its ticket must stay", st.Waiters)
	}
}

// EnqueuedWithin counts the tickets present at the enqueue, whatever
// happens to them after: the holder's and each waiter's ahead.
func TestEnqueuedWithin(t *testing.T) {
	q := openQ(t, t.TempDir(), "gpu")
	a := take(t, q, "a")
	defer a.Release()
	w1 := enqueueH(t, q, "w1")
	defer w1.Cancel()
	if !w1.EnqueuedWithin(1) || w1.EnqueuedWithin(0) {
		t.Fatalf("behind the holder alone: within 1 %v, within 0 %v; want true, false", w1.EnqueuedWithin(1), w1.EnqueuedWithin(0))
	}
	w2 := enqueueH(t, q, "w2")
	defer w2.Cancel()
	w1.Cancel()
	if w2.EnqueuedWithin(1) || !w2.EnqueuedWithin(2) {
		t.Fatalf("enqueued behind the holder and w1: within 1 %v, within 2 %v; want false, true (w1 left since, WaitAhead looks)", w2.EnqueuedWithin(1), w2.EnqueuedWithin(2))
	}
}

// WaitAhead never takes the token: at the head of a free queue it returns
// at once, and a wait for fewer than no tickets ahead (which no look could
// end but a grant) is refused.
func TestWaitAheadNeverTakesTheToken(t *testing.T) {
	q := openQ(t, t.TempDir(), "gpu")
	w := enqueueH(t, q, "w")
	defer w.Cancel()
	if err := w.WaitAhead(ctxT(t, 10*time.Second), 0); err != nil {
		t.Fatalf("WaitAhead(0) at the head of a free queue: %v", err)
	}
	if err := w.WaitAhead(ctxT(t, time.Second), -1); err == nil {
		t.Fatal("WaitAhead(-1) was not refused")
	}
	st, err := q.Status()
	if err != nil {
		t.Fatal(err)
	}
	if st.Holder != nil || len(st.Waiters) != 1 || st.Waiters[0].Seq != w.Ticket().Seq {
		t.Fatalf("after WaitAhead: holder %v, waiters %v; want no holder and our ticket waiting", st.Holder, st.Waiters)
	}
}

// WaitAhead's look reads the nearest tickets ahead until it has counted
// within+1, passing over a dead waiter's and a yielding one's: never the
// far end of the queue, nor the holder's.
func TestWaitAheadReadsOnlyTheNearest(t *testing.T) {
	dir := t.TempDir()
	q := openQ(t, dir, "gpu")
	a := take(t, q, "a")
	defer a.Release()
	// Not a ticket, at the far end: a look that reads it warns.
	planted := filepath.Join(q.path, ticketName(a.Ticket().Seq+1))
	if err := os.WriteFile(planted, []byte("planted\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	far := enqueueH(t, q, "far")
	defer far.Cancel()
	next := enqueueH(t, q, "next")
	defer next.Cancel()
	h := startHelper(t, "enqueue", dir, "gpu", helperOpts{label: "dead"})
	dead := h.seq("ticket")
	h.kill()
	y, err := q.Enqueue(Ticket{Label: "yields", Yield: true})
	if err != nil {
		t.Fatal(err)
	}
	defer y.Cancel()
	near := enqueueH(t, q, "near")
	defer near.Cancel()
	me := enqueueH(t, q, "me")
	defer me.Cancel()

	s, err := q.dirQueue.scanAhead(me.Ticket().Seq, 2)
	if err != nil {
		t.Fatal(err)
	}
	var read []uint64
	for _, e := range s.tickets {
		read = append(read, e.Seq)
	}
	want := []uint64{next.Ticket().Seq, dead, y.Ticket().Seq, near.Ticket().Seq}
	if !slices.Equal(read, want) {
		t.Fatalf("read tickets %v, want %v (next, the dead one, the yielding one, near)", read, want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := me.WaitAhead(ctx, 2); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitAhead(2) with far, next and near ahead: %v, want it to wait", err)
	}
	if w := q.warnings("not a ticket"); len(w) > 0 {
		t.Fatalf("WaitAhead read the far end of the queue: %v", w)
	}
	far.Cancel()
	if err := me.WaitAhead(ctxT(t, 10*time.Second), 2); err != nil {
		t.Fatalf("WaitAhead(2) with next and near ahead: %v", err)
	}
}
