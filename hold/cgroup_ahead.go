// cgroup_ahead.go owns the payload's cgroup made ahead of the grant: at the
// head of the queue, in the background, so that the hand-off does not wait
// for its mkdir (nor for the sweep of old ones). One the hold never used is
// removed when the hold ends.
package hold

import (
	"sync"
	"sync/atomic"

	"github.com/gpu-hold/gpu-hold/internal/cgroup"
)

// cgroupAhead is the payload's cgroup, made once: at the head of the
// queue, or at the grant when the token came at once. A nil one makes it
// at the grant.
type cgroupAhead struct {
	once  sync.Once
	begun atomic.Bool
	done  chan struct{} // closed when the make has returned
	cg    *cgroup.Cgroup
	err   error
	taken bool
}

// start makes the cgroup in the background, once.
func (a *cgroupAhead) start(h *holdRun) {
	if a == nil {
		return
	}
	a.once.Do(func() {
		a.done = make(chan struct{})
		a.begun.Store(true)
		go func() {
			defer close(a.done)
			a.cg, a.err = h.makeCgroup()
		}()
	})
}

// take is the cgroup for the payload (nil: none), made now when the head
// did not start it, and made anew when the one made ahead has waited long
// enough that another hold's sweep may have removed it.
func (a *cgroupAhead) take(h *holdRun) (*cgroup.Cgroup, error) {
	if a == nil {
		return h.makeCgroup()
	}
	a.start(h)
	<-a.done
	a.taken = true
	if a.cg != nil && !a.cg.Fresh() {
		a.cg.Remove(0)
		return h.makeCgroup()
	}
	return a.cg, a.err
}

// drop removes the cgroup made ahead when the payload never got it: the
// hold ended while it waited, or before its payload was launched. (A hold
// killed before this runs leaves it empty, for a later hold's sweep.)
func (a *cgroupAhead) drop() {
	if a == nil || !a.begun.Load() || a.taken {
		return
	}
	<-a.done
	if a.cg != nil {
		a.cg.Remove(0)
	}
}
