// busy_test.go checks how the busy-host target is judged: the largest
// size against the idle host, and against the mean of the two idle rows
// when the idle host was measured again after the largest.
package main

import "testing"

func TestBusyTargets(t *testing.T) {
	row := func(n int, ms float64, again bool) BusyRow {
		d := map[string]Dist{"proc": {N: 1, Median: ms}}
		return BusyRow{Processes: n, HoldMS: d, HoldCPUMS: d, CheckMS: map[string]Dist{}, Again: again}
	}
	for _, c := range []struct {
		name string
		rows []BusyRow
		want string
	}{
		{"within 1.2x", []BusyRow{row(0, 30, false), row(20000, 34, false)}, "met"},
		{"past 1.2x", []BusyRow{row(0, 30, false), row(20000, 40, false)}, "missed"},
		{"the VM slowed: judged on the mean idle", []BusyRow{row(0, 30, false), row(20000, 40, false), row(0, 40, true)}, "met"},
		{"the VM sped up: judged on the mean idle", []BusyRow{row(0, 40, false), row(20000, 40, false), row(0, 20, true)}, "missed"},
	} {
		b := &bench{res: &Results{Busy: &BusyResult{Rows: c.rows}}}
		b.cfg.Backends = []string{"proc"}
		var got string
		for _, tg := range b.busyTargets() {
			if tg.Name == "busy host, gpu-hold proc --device, 20000 processes" {
				got = tg.Status
			}
		}
		if got != c.want {
			t.Errorf("%s: status %q, want %q", c.name, got, c.want)
		}
	}
}
