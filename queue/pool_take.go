// pool_take.go owns a pool ticket's start: taking the token of every
// device the schedule gave it, or none, then republishing the pool ticket
// with the devices it holds; and giving the scheduling lock back.
package queue

import (
	"encoding/json"
	"errors"

	"golang.org/x/sys/unix"
)

// errBusy: a device the schedule gave was taken meanwhile (a hold of the
// device itself): nothing was kept; the next round decides again.
var errBusy = errors.New("a device was taken meanwhile")

// take takes the token of every device d gives, or none.
func (pw *PoolWaiter) take(d Decision) (*PoolGrant, error) {
	me := pw.w.e.Ticket
	var gs []*grant
	fail := func(err error) (*PoolGrant, error) {
		for _, g := range gs {
			g.Release()
		}
		return nil, err
	}
	for _, i := range d.Devices {
		dq := pw.p.devs[i]
		t := Ticket{Label: me.Label, Holder: me.Holder, Host: me.Host, Cmd: me.Cmd, HoldID: me.HoldID, Record: me.Record, Count: me.Count, Bound: me.Bound, PoolSeq: me.Seq, PidNS: me.PidNS}
		w, err := dq.Enqueue(t)
		if err != nil {
			return fail(err)
		}
		g, done, err := w.(*waiter).tryNow()
		if !done {
			w.Cancel()
			return fail(errBusy)
		}
		if err != nil {
			return fail(err)
		}
		gs = append(gs, g.(*grant))
	}
	if err := pw.running(d.Devices); err != nil {
		return fail(err)
	}
	return newPoolGrant(pw, d, gs)
}

// running republishes the pool ticket with the devices it holds, so the
// listing shows them and the schedule no longer counts it as waiting.
func (pw *PoolWaiter) running(devs []int) error {
	w := pw.w
	t := w.e.Ticket
	t.Devices = devs
	b, _ := json.Marshal(t)
	fd, st, err := w.q.publish(w.e.name, append(b, '\n'), false)
	if err != nil {
		return err
	}
	w.mu.Lock()
	unix.Close(w.fd)
	w.fd = fd
	w.e.Ticket, w.e.dev, w.e.ino = t, st.Dev, st.Ino
	w.mu.Unlock()
	return nil
}

// unlock gives the scheduling lock back, keeping the file open for the
// next round.
func (tl *tokenLock) unlock() {
	if tl.held {
		unix.Flock(tl.fd, unix.LOCK_UN)
		tl.held = false
	}
	if tl.guard > 0 {
		unix.Close(tl.guard)
		tl.guard = 0
	}
}
