// handover.go owns a waiting ticket kept across an exec of its owner: the
// owner keeps its pid and start time (the ticket's Holder), and the exec
// keeps the fd that holds the ticket's lock, so the new image adopts the
// same ticket, in the same place. It also owns the wait for a place in
// the queue that never takes the token (the slim waiting image's).
package queue

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/proc"
)

// Handover is what a new image needs to adopt a waiting ticket.
type Handover struct {
	FD  int    `json:"fd"`  // holds the ticket's lock, kept open across the exec
	Seq uint64 `json:"seq"` // the ticket
}

// Handable is a Waiter of the directory queue that can be kept across an
// exec of its owner.
type Handable interface {
	Waiter
	// EnqueuedWithin reports whether at most n tickets were in the queue
	// when ours was taken, so that at most n can be ahead of it now. It
	// reads nothing: false (more, or an adopted ticket) says only that
	// WaitAhead must look.
	EnqueuedWithin(n int) bool
	// Handover lets the ticket's lock fd survive an exec; Keep undoes it
	// when the exec failed.
	Handover() (Handover, error)
	Keep()
	// WaitAhead blocks until at most n live waiting tickets are ahead of
	// ours. It never takes the token, and when ctx ends or the queue
	// cannot be read it returns the error with the ticket still in place:
	// whoever adopts it next reports it. ErrRemoved: someone removed the
	// ticket.
	WaitAhead(ctx context.Context, n int) error
}

// adopter is the directory queue (embedded in tests' own queue type).
type adopter interface {
	adopt(Handover) (*waiter, error)
}

// Adopt returns the waiter of a ticket this process queued in an earlier
// image. The ticket must be ours: a regular file of our uid named for h's
// seq, that h's fd opens, whose holder is this process (pid and start
// time), waiting, and whose lock the fd holds. ErrRemoved: it was removed.
// A ticket that is not adopted keeps its fd as it was.
func Adopt(q Queue, h Handover) (Handable, error) {
	dq, ok := q.(adopter)
	if !ok {
		return nil, fmt.Errorf("only the directory queue can adopt a ticket across an exec")
	}
	return dq.adopt(h)
}

func (q *dirQueue) adopt(h Handover) (*waiter, error) {
	e, ok := q.readTicket(ticketName(h.Seq), h.Seq)
	if !ok {
		return nil, ErrRemoved
	}
	var st unix.Stat_t
	if err := unix.Fstat(h.FD, &st); err != nil {
		return nil, fmt.Errorf("ticket %d's fd %d is not open (%v): it was not handed over", h.Seq, h.FD, err)
	}
	if e.dev != st.Dev || e.ino != st.Ino {
		return nil, ErrRemoved
	}
	self, err := proc.Self()
	switch {
	case err != nil:
		err = fmt.Errorf("cannot read this process's identity: %v", err)
	case e.UID != q.euid || e.Holder != self:
		err = fmt.Errorf("ticket %d in %s is not this process's (uid %d, holder %v): not adopting it", h.Seq, q.path, e.UID, e.Holder)
	case e.granted():
		err = fmt.Errorf("ticket %d in %s is granted, not waiting: not adopting it", h.Seq, q.path)
	default:
		// Our open file description holds the lock: locking it again
		// succeeds. One another process holds fails.
		if ferr := unix.Flock(h.FD, unix.LOCK_EX|unix.LOCK_NB); ferr != nil {
			err = fmt.Errorf("ticket %d in %s is locked by another process (%v): not adopting it", h.Seq, q.path, ferr)
		}
	}
	if err != nil {
		return nil, err
	}
	unix.CloseOnExec(h.FD)
	e.live = true
	return &waiter{q: q, e: e, fd: h.FD, below: -1}, nil
}

// EnqueuedWithin: see Handable.
func (w *waiter) EnqueuedWithin(n int) bool { return w.below >= 0 && w.below <= n }

// Handover clears close-on-exec on the ticket's lock fd.
func (w *waiter) Handover() (Handover, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fd < 0 {
		return Handover{}, ErrRemoved
	}
	if _, err := unix.FcntlInt(uintptr(w.fd), unix.F_SETFD, 0); err != nil {
		return Handover{}, fmt.Errorf("cannot keep ticket %d's lock across an exec: %v", w.e.Seq, err)
	}
	return Handover{FD: w.fd, Seq: w.e.Seq}, nil
}

// Keep sets close-on-exec on the ticket's lock fd again.
func (w *waiter) Keep() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fd >= 0 {
		unix.CloseOnExec(w.fd)
	}
}

// WaitAhead: see Handable.
func (w *waiter) WaitAhead(ctx context.Context, n int) error {
	if w.e.Yield {
		return errors.New("a yielding ticket has no fixed place to wait for")
	}
	if n < 0 {
		// Its looks do not see the holder: at the head they would take
		// the token.
		return fmt.Errorf("cannot wait for fewer than no tickets ahead (%d)", n)
	}
	l, err := w.watchLoop(ctx, nil, w.e.Created)
	if err != nil {
		return err
	}
	defer l.close()
	l.placeOnly, l.within = true, n
	for {
		if _, done, err := l.round(); done {
			return err
		}
	}
}
