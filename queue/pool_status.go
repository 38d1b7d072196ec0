// pool_status.go owns the snapshot of a pool for `gpu-hold queue`: each
// device's flock-proven holder (and its dead, unreaped ones), the pool
// tickets running and waiting, and what the head waits for; per device,
// why its holder keeps it and who holds its locks with no ticket.
package queue

import "time"

// PoolStatus is a snapshot of a pool.
type PoolStatus struct {
	Resource string         `json:"resource"`
	Devices  []DeviceStatus `json:"devices"`
	Running  []Ticket       `json:"running"` // pool tickets holding devices (as they say)
	Waiters  []Ticket       `json:"waiters"`
	// HeadWaits says what the first waiting ticket waits for.
	HeadWaits string   `json:"head_waits,omitempty"`
	Skipped   []string `json:"skipped,omitempty"`
}

// DeviceStatus is one device's queue.
type DeviceStatus struct {
	Index  int       `json:"index"`
	Queue  string    `json:"queue"`
	Holder *Ticket   `json:"holder,omitempty"` // holds its token (flock-proven)
	Until  time.Time `json:"until,omitempty"`  // bound on its release; zero: unknown
	Dead   []Ticket  `json:"dead,omitempty"`
	// Keeping: why its holder keeps its token after its payload ended
	// (keeping.go); Lockers: processes that hold its token's or its
	// directory's lock where no gpu-hold holder explains it (locker.go).
	Keeping *Keeping `json:"keeping,omitempty"`
	Lockers []Locker `json:"lockers,omitempty"`
}

// Status lists the pool. It changes nothing.
func (p *Pool) Status() (PoolStatus, error) {
	snap, err := p.q.scan()
	if err != nil {
		return PoolStatus{}, err
	}
	st := PoolStatus{Resource: p.q.resource, Running: []Ticket{}, Waiters: []Ticket{}, Skipped: snap.skipped}
	for _, e := range snap.tickets {
		switch {
		case !e.live || e.granted():
		case len(e.Devices) > 0:
			st.Running = append(st.Running, e.Ticket)
		default:
			st.Waiters = append(st.Waiters, e.Ticket)
		}
	}
	views, states, err := p.view()
	if err != nil {
		return PoolStatus{}, err
	}
	for i, v := range views {
		ds := DeviceStatus{Index: i, Until: states[i].Until}
		if p.devs[i] == nil {
			st.Devices = append(st.Devices, ds)
			continue
		}
		ds.Queue = p.devs[i].resource
		if v.holder != nil {
			t := v.holder.Ticket
			ds.Holder = &t
		}
		if v.holder != nil {
			ds.Keeping = p.devs[i].keepingOf(v.holder)
		}
		if s, err := p.devs[i].scan(); err == nil {
			for _, e := range s.deadOrUnheld(p.devs[i]) {
				ds.Dead = append(ds.Dead, e.Ticket)
			}
			ds.Lockers = s.lockers(p.devs[i], v.holder)
		}
		st.Devices = append(st.Devices, ds)
	}
	if reqs := p.requests(snap); len(reqs) > 0 {
		d := Schedule(states, reqs, reqs[0].Seq, time.Now(), p.backfill)
		st.HeadWaits = d.Wait
		if d.Start {
			st.HeadWaits = "about to start (the devices it needs are free)"
		}
	}
	return st, nil
}
