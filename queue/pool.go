// pool.go owns a pool's queue on the directory backend: the pool
// resource's directory keeps the FIFO of pool tickets and its token is the
// scheduling lock (held for a moment, never for a hold), and each device
// is a resource queue of its own whose token is that device, held for the
// whole hold with the same guarantees as any token (flock-proven holder,
// dead-holder hand-off, owner checks). Only a waiter the schedule lets
// start takes device tokens, all it needs at once under the scheduling
// lock or none, so there is never a partial hold and no deadlock.
package queue

import (
	"errors"
	"fmt"
	"time"
)

// Pool is a pool resource's queue.
type Pool struct {
	q        *dirQueue   // the pool's FIFO; its token is the scheduling lock
	devs     []*dirQueue // one queue per device, in pool order
	backfill bool
}

// OpenPool opens the queue of pool resource resource in dir, whose devices
// have the resource queues devices (in pool order). backfill lets a later
// ticket start before the head when it provably ends first. With
// opts.NoCreate (a listing) a device nobody has queued for counts as free.
func OpenPool(dir, resource string, devices []string, backfill bool, opts DirOptions) (*Pool, error) {
	pq, err := OpenDir(dir, resource, opts)
	if err != nil {
		return nil, err
	}
	p := &Pool{q: pq.(*dirQueue), backfill: backfill}
	for _, name := range devices {
		dq, err := OpenDir(dir, name, opts)
		if opts.NoCreate && errors.Is(err, ErrNoResource) {
			p.devs = append(p.devs, nil) // nobody has used it: free
			continue
		}
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("device queue of pool %s: %w", resource, err)
		}
		p.devs = append(p.devs, dq.(*dirQueue))
	}
	return p, nil
}

// Close closes the pool's directory fds.
func (p *Pool) Close() error {
	for _, d := range p.devs {
		if d != nil {
			d.Close()
		}
	}
	return p.q.Close()
}

// Size is the number of devices.
func (p *Pool) Size() int { return len(p.devs) }

// Enqueue takes a pool ticket for t, asking for t.Count devices.
func (p *Pool) Enqueue(t Ticket) (*PoolWaiter, error) {
	if t.Count < 1 || t.Count > len(p.devs) {
		return nil, fmt.Errorf("cannot ask for %d of the %d devices of %s", t.Count, len(p.devs), p.q.resource)
	}
	t, err := p.q.fill(t)
	if err != nil {
		return nil, err
	}
	e, fd, _, err := p.q.newTicket(t)
	if err != nil {
		return nil, err
	}
	return &PoolWaiter{p: p, w: &waiter{q: p.q, e: e, fd: fd, below: -1}}, nil
}

// devView is one device's state under the scheduling lock.
type devView struct {
	holder *entry // its flock-proven holder
	busy   bool   // held, or waited for by a hold of the device itself
}

// view reads every device's state.
func (p *Pool) view() ([]devView, []DevState, error) {
	views := make([]devView, len(p.devs))
	states := make([]DevState, len(p.devs))
	for i, dq := range p.devs {
		if dq == nil {
			states[i].Free = true
			continue
		}
		snap, err := dq.scan()
		if err != nil {
			return nil, nil, err
		}
		v := &views[i]
		if h := snap.holder(dq); h != nil {
			v.holder, v.busy = h, true
			if h.PoolSeq != 0 && h.Bound > 0 {
				states[i].Until = h.Granted.Add(h.Bound)
			}
		}
		for _, e := range snap.tickets {
			if e.live && !e.granted() && !e.Yield {
				v.busy = true // a hold of the device itself waits for it (a serve keeper's gives way)
			}
		}
		if !v.busy && dq.tokenLocked() {
			v.busy = true // locked by a process with no valid ticket
		}
		states[i].Free = !v.busy
		if v.busy && v.holder == nil {
			states[i].Until = time.Time{}
		}
	}
	return views, states, nil
}

// requests are the live waiting pool tickets (not yet running), in order;
// a count a ticket cannot have is clamped, so a forged one blocks no more
// than a ticket asking for every device.
func (p *Pool) requests(s *snapshot) []Request {
	var out []Request
	for _, e := range s.tickets {
		if !e.live || e.granted() || len(e.Devices) > 0 {
			continue
		}
		out = append(out, Request{Seq: e.Seq, Count: min(max(e.Count, 1), len(p.devs)), Bound: max(e.Bound, 0)})
	}
	return out
}
