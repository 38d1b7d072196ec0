// cancel.go owns removing a waiting ticket by number (`gpu-hold cancel`):
// only its owner or root may, and a ticket that holds the token is not a
// waiting ticket (a running hold is ended by signalling it: hold.CancelRunning).
package queue

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// ErrHolding: Cancel was asked for a ticket that holds (or held, and died
// holding) the token.
var ErrHolding = errors.New("ticket holds the token")

// Cancel removes waiting ticket seq on behalf of uid.
func (q *dirQueue) Cancel(seq uint64, uid int) error {
	name := ticketName(seq)
	e, ok := q.readTicket(name, seq)
	if !ok {
		if e.name != "" {
			return fmt.Errorf("%s/%s is not a valid ticket (see the warning): its owner or an admin should remove it by hand", q.path, name)
		}
		return tagged(ErrNoTicket, "ticket %d is not in the queue of %s (%s): see `gpu-hold queue -r %s`", seq, q.resource, q.path, q.resource)
	}
	if uid != 0 && uid != e.UID {
		return tagged(ErrNotOwner, "%s belongs to another user: only its owner or root may cancel it", e.Describe())
	}
	if e.granted() || len(e.Devices) > 0 { // a running pool ticket holds devices
		if e.live {
			return tagged(ErrHolding, "%s took the token while it was being cancelled: run gpu-hold cancel again to end the running hold", e.Describe())
		}
		return tagged(ErrHolding, "%s held the token and died; its processes may still run: run `gpu-hold reap -r %s`", e.Describe(), q.resource)
	}
	if err := q.removeIfSame(name, e.dev, e.ino); err != nil {
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
			return tagged(ErrNotOwner, "the kernel refused to let uid %d remove %s: only its owner or root may", q.euid, e.Describe())
		}
		return fmt.Errorf("cannot remove %s/%s: %v", q.path, name, err)
	}
	return nil
}

// taggedError is an error that is sentinel for errors.Is without repeating
// its text ("ticket holds the token: ... holds the token").
type taggedError struct {
	sentinel error
	msg      string
}

func tagged(sentinel error, format string, a ...any) error {
	return &taggedError{sentinel, fmt.Sprintf(format, a...)}
}

func (e *taggedError) Error() string { return e.msg }
func (e *taggedError) Unwrap() error { return e.sentinel }
