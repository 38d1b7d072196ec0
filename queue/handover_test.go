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
	if near, err := adopted.AheadAtMost(0); err != nil || near {
		t.Fatalf("adopted ticket: at most 0 ahead %v (%v), want false (w1 is ahead)", near, err)
	}
	if near, err := adopted.AheadAtMost(1); err != nil || !near {
		t.Fatalf("adopted ticket: at most 1 ahead %v (%v), want true", near, err)
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

// AheadAtMost counts the live tickets ahead: the tickets present at the
// enqueue bound them (no scan when they were few enough), the queue's
// scan counts them when they were more.
func TestAheadAtMost(t *testing.T) {
	q := openQ(t, t.TempDir(), "gpu")
	a := take(t, q, "a")
	defer a.Release()
	w1 := enqueueH(t, q, "w1")
	if near, err := w1.AheadAtMost(0); err != nil || !near {
		t.Fatalf("behind the holder alone: at most 0 ahead %v (%v), want true", near, err)
	}
	w2 := enqueueH(t, q, "w2")
	w3 := enqueueH(t, q, "w3")
	defer w3.Cancel()
	if near, err := w3.AheadAtMost(1); err != nil || near {
		t.Fatalf("with w1 and w2 ahead: at most 1 ahead %v (%v), want false", near, err)
	}
	w2.Cancel()
	if near, err := w3.AheadAtMost(1); err != nil || !near {
		t.Fatalf("with w1 ahead alone: at most 1 ahead %v (%v), want true", near, err)
	}
	w1.Cancel()
	if near, err := w3.AheadAtMost(0); err != nil || !near {
		t.Fatalf("with none ahead: at most 0 ahead %v (%v), want true", near, err)
	}
}
