// schedule_test.go tests the pool's schedule decision as a table.
package queue

import (
	"reflect"
	"testing"
	"time"
)

func TestSchedule(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	free := DevState{Free: true}
	until := func(d time.Duration) DevState { return DevState{Until: now.Add(d)} }
	unknown := DevState{}
	req := func(seq uint64, n int, b time.Duration) Request { return Request{Seq: seq, Count: n, Bound: b} }
	cases := []struct {
		name     string
		devs     []DevState
		queue    []Request
		me       uint64
		backfill bool
		start    bool
		devices  []int
		bf       bool
		head     time.Time
	}{
		{"alone, fits", []DevState{free, free, free}, []Request{req(1, 2, 0)}, 1, true, true, []int{0, 1}, false, time.Time{}},
		{"alone, too few free", []DevState{free, until(time.Hour)}, []Request{req(1, 2, 0)}, 1, true, false, nil, false, now.Add(time.Hour)},
		{"head unknown start", []DevState{free, unknown}, []Request{req(1, 2, 0)}, 1, true, false, nil, false, time.Time{}},
		{"second fits after first", []DevState{free, free, free}, []Request{req(1, 1, 0), req(2, 2, 0)}, 2, false, true, []int{1, 2}, false, time.Time{}},
		{"strict FIFO blocks behind head", []DevState{free, until(time.Hour)}, []Request{req(1, 2, 0), req(2, 1, time.Minute)}, 2, false, false, nil, false, now.Add(time.Hour)},
		{"backfill ends before head", []DevState{free, until(time.Hour)}, []Request{req(1, 2, 0), req(2, 1, time.Minute)}, 2, true, true, []int{0}, true, now.Add(time.Hour)},
		{"backfill ends exactly at head", []DevState{free, until(time.Hour)}, []Request{req(1, 2, 0), req(2, 1, time.Hour)}, 2, true, true, []int{0}, true, now.Add(time.Hour)},
		{"backfill would end after head", []DevState{free, until(time.Hour)}, []Request{req(1, 2, 0), req(2, 1, 2*time.Hour)}, 2, true, false, nil, false, now.Add(time.Hour)},
		{"no max hold, no backfill", []DevState{free, until(time.Hour)}, []Request{req(1, 2, 0), req(2, 1, 0)}, 2, true, false, nil, false, now.Add(time.Hour)},
		{"head start unknown, no backfill", []DevState{free, unknown}, []Request{req(1, 2, 0), req(2, 1, time.Second)}, 2, true, false, nil, false, time.Time{}},
		{"head needs the earliest of two", []DevState{free, until(2 * time.Hour), until(time.Hour)}, []Request{req(1, 2, 0), req(2, 1, 90*time.Minute)}, 2, true, false, nil, false, now.Add(time.Hour)},
		{"head needs the unknown one", []DevState{free, unknown, until(time.Hour)}, []Request{req(1, 3, 0), req(2, 1, time.Minute)}, 2, true, false, nil, false, time.Time{}},
		{"an unknown one the head does not need", []DevState{free, unknown, until(time.Hour)}, []Request{req(1, 2, 0), req(2, 1, time.Minute)}, 2, true, true, []int{0}, true, now.Add(time.Hour)},
		{"earlier backfiller first", []DevState{free, until(time.Hour)}, []Request{req(1, 2, 0), req(2, 1, time.Minute), req(3, 1, time.Minute)}, 3, true, false, nil, false, now.Add(time.Hour)},
		{"both backfill", []DevState{free, free, until(time.Hour), until(time.Hour)}, []Request{req(1, 4, 0), req(2, 1, time.Minute), req(3, 1, time.Minute)}, 3, true, true, []int{1}, true, now.Add(time.Hour)},
		{"too big to backfill", []DevState{free, until(time.Hour), until(time.Hour)}, []Request{req(1, 3, 0), req(2, 2, time.Minute)}, 2, true, false, nil, false, now.Add(time.Hour)},
		{"a starter ahead of the head counts with its bound", []DevState{free, free, until(time.Hour)}, []Request{req(1, 1, 30*time.Minute), req(2, 3, 0), req(3, 1, 20*time.Minute)}, 3, true, true, []int{1}, true, now.Add(time.Hour)},
		{"a starter ahead without a bound makes it unknown", []DevState{free, free, until(time.Hour)}, []Request{req(1, 1, 0), req(2, 3, 0), req(3, 1, time.Minute)}, 3, true, false, nil, false, time.Time{}},
	}
	for _, c := range cases {
		d := Schedule(c.devs, c.queue, c.me, now, c.backfill)
		if d.Start != c.start || !reflect.DeepEqual(d.Devices, c.devices) || d.Backfill != c.bf || !d.HeadStart.Equal(c.head) {
			t.Errorf("%s: got start=%v devices=%v backfill=%v head start %v (%s); want start=%v devices=%v backfill=%v head start %v",
				c.name, d.Start, d.Devices, d.Backfill, d.HeadStart, d.Wait, c.start, c.devices, c.bf, c.head)
		}
		if !d.Start && d.Wait == "" {
			t.Errorf("%s: a waiter must be told what it waits for", c.name)
		}
	}
}
