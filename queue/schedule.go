// schedule.go owns the pool's schedule decision, as a pure function of
// what the devices' holders and the waiting tickets are: strict FIFO (every
// ticket that fits starts in order, the first that does not fit is the head
// and blocks those behind it), and backfill, which lets a later ticket
// start on idle devices only when its bound provably ends before the
// earliest moment the head could start.
package queue

import (
	"fmt"
	"sort"
	"time"
)

// DevState is one pool device as the schedule sees it.
type DevState struct {
	Free bool
	// Until is when a busy device's holder is bound to have released it
	// (its grant plus its bound); zero: unknown (no max hold, or not a
	// pool hold), which rules backfill out while the head needs it.
	Until time.Time
}

// Request is a waiting ticket: how many devices, and the bound on its
// tenure once granted (0: none, so it can never be backfilled).
type Request struct {
	Seq   uint64
	Count int
	Bound time.Duration
}

// Decision is what the waiter of one ticket may do now.
type Decision struct {
	Start    bool
	Devices  []int // indices to take when Start
	Backfill bool  // Start overtakes the head
	Head     uint64
	// HeadStart is the earliest the head can start; zero: unknown (or
	// no head is blocked).
	HeadStart time.Time
	Wait      string // what the waiter waits for, when not Start
	// Along are the tickets ahead that fit now too (they start with this
	// one, so a Start that is not Backfill overtakes nobody who waits).
	Along []uint64
	// At is when the decision was taken (set by the caller).
	At time.Time
}

// Schedule decides for ticket me of queue (waiting tickets in FIFO order)
// on devs at now.
func Schedule(devs []DevState, queue []Request, me uint64, now time.Time, backfill bool) Decision {
	var avail []int
	var busy []time.Time // release bounds of what is or will be busy; zero: unknown
	for i, d := range devs {
		if d.Free {
			avail = append(avail, i)
		} else {
			busy = append(busy, d.Until)
		}
	}
	var d Decision
	blocked := false
	for _, r := range queue {
		fits := r.Count <= len(avail)
		switch {
		case !blocked && fits:
			take := avail[:r.Count:r.Count]
			avail = avail[r.Count:]
			if r.Seq == me {
				d.Start, d.Devices = true, take
				return d
			}
			busy = append(busy, untilOf(now, r.Bound, r.Count)...)
			d.Along = append(d.Along, r.Seq)
			continue
		case !blocked:
			blocked = true
			d.Head = r.Seq
			d.HeadStart = shadow(busy, r.Count-len(avail))
			if r.Seq == me {
				d.Wait = headWait(r.Count, len(avail), d.HeadStart)
				return d
			}
			continue
		}
		ok := backfill && fits && r.Bound > 0 && !d.HeadStart.IsZero() && !now.Add(r.Bound).After(d.HeadStart)
		if ok {
			take := avail[:r.Count:r.Count]
			avail = avail[r.Count:]
			if r.Seq == me {
				d.Start, d.Devices, d.Backfill = true, take, true
				return d
			}
			continue
		}
		if r.Seq == me {
			d.Wait = behindWait(d, r, len(avail), backfill)
			return d
		}
	}
	d.Wait = "the ticket is not in the queue"
	return d
}

// untilOf is the release bounds of n devices taken now for bound b.
func untilOf(now time.Time, b time.Duration, n int) []time.Time {
	out := make([]time.Time, n)
	if b > 0 {
		for i := range out {
			out[i] = now.Add(b)
		}
	}
	return out
}

// shadow is when k more of the busy devices are bound to be free: the
// k-th earliest release, zero when that one is unknown.
func shadow(busy []time.Time, k int) time.Time {
	if k <= 0 || k > len(busy) {
		return time.Time{}
	}
	s := append([]time.Time(nil), busy...)
	sort.Slice(s, func(i, j int) bool {
		switch {
		case s[i].IsZero():
			return false
		case s[j].IsZero():
			return true
		}
		return s[i].Before(s[j])
	})
	return s[k-1]
}

func headWait(count, free int, start time.Time) string {
	w := fmt.Sprintf("first in line: waits for %d device(s), %d free", count, free)
	if start.IsZero() {
		return w + "; earliest start unknown (a holder has no max hold)"
	}
	return w + "; earliest start " + start.Format(time.RFC3339)
}

func behindWait(d Decision, r Request, free int, backfill bool) string {
	w := fmt.Sprintf("behind ticket %d, which is first in line", d.Head)
	switch {
	case !backfill:
		return w + " (backfill is off)"
	case r.Count > free:
		return w + fmt.Sprintf("; %d device(s) free, %d asked", free, r.Count)
	case r.Bound <= 0:
		return w + "; no --max-hold, so it cannot start before it"
	case d.HeadStart.IsZero():
		return w + "; its earliest start is unknown (a holder has no max hold), so nothing may start before it"
	}
	return w + "; this hold's max hold would end after that ticket's earliest start " + d.HeadStart.Format(time.RFC3339)
}
