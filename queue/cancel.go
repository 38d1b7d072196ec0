// cancel.go owns removing a waiting ticket by number (`gpu-hold cancel`):
// only its owner or root may, and a ticket that holds the token is not a
// waiting ticket.
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
		return fmt.Errorf("%w: ticket %d is not in the queue of %s (%s): see `gpu-hold queue -r %s`", ErrNoTicket, seq, q.resource, q.path, q.resource)
	}
	if uid != 0 && uid != e.UID {
		return fmt.Errorf("%w: ticket %d (%s) belongs to uid %d; only its owner or root may cancel it", ErrNotOwner, seq, e.Describe(), e.UID)
	}
	if e.granted() || len(e.Devices) > 0 { // a running pool ticket holds devices
		if e.live {
			return fmt.Errorf("%w: ticket %d (%s) holds the token; cancel removes waiting tickets only: to end the hold, send its gpu-hold (pid %d) SIGTERM", ErrHolding, seq, e.Describe(), e.Holder.PID)
		}
		return fmt.Errorf("%w: ticket %d (%s) held the token and died; its processes may still run: run `gpu-hold reap -r %s`", ErrHolding, seq, e.Describe(), q.resource)
	}
	if err := q.removeIfSame(name, e.dev, e.ino); err != nil {
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
			return fmt.Errorf("%w: the kernel refused to let uid %d remove ticket %d (%s) of uid %d: only its owner or root may", ErrNotOwner, q.euid, seq, e.Describe(), e.UID)
		}
		return fmt.Errorf("cannot remove %s/%s: %v", q.path, name, err)
	}
	return nil
}
