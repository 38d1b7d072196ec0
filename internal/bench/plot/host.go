// host.go owns the busy-host figures: a hold's time, and the device check's
// time per way of checking, as the host fills with processes.
package main

import (
	"gonum.org/v1/plot/vg"
)

// hostHolds are the holds' backends in the legend's order.
var hostHolds = []struct {
	backend, name string
	look          look
}{
	{"proc", "gpu-hold --track=proc --device NODE -- true", blue},
	{"bpf", "gpu-hold --track=bpf --device NODE -- true", vermilion},
}

// hostChecks are the device check's ways in the legend's order.
var hostChecks = []struct {
	way, name string
	look      look
}{
	{"watch", "device watch: only the device's openers' fd tables", green},
	{"watch-blocked", "device watch, its holder asleep in a read: every fd table", skyBlue},
	{"kernel", "BPF iterator: every fd table in the kernel", orange},
	{"proc", "walk of /proc: every fd (the fallback without BPF)", purple},
}

const hostAxis = "unrelated processes on the host, 50 open files each (in the order measured)"

// drawHost: the hold's figure and the check's figure.
func drawHost(r results) ([]figure, error) {
	if r.Busy == nil || len(r.Busy.Rows) == 0 {
		return nil, nil
	}
	hold, err := drawHostHold(r)
	if err != nil {
		return nil, err
	}
	check, err := drawHostCheck(r)
	if err != nil {
		return nil, err
	}
	return []figure{hold, check}, nil
}

// drawHostHold: a whole hold with a device check against the host's size.
func drawHostHold(r results) (figure, error) {
	f := newFigure("host-size-hold.svg", lines(
		"Does a hold take longer as the host fills with processes?",
		"(a whole hold with a device check, per backend)"), 8*vg.Inch, 4.8*vg.Inch)
	p := f.plot
	p.X.Label.Text = hostAxis
	p.Y.Label.Text = "wall time of one hold, ms"
	p.Y.Tick.Marker = linearTicks{}
	p.Add(grid())
	for i, h := range hostHolds {
		var pts []spreadPoint
		for j, row := range r.Busy.Rows {
			if d, ok := row.HoldMS[h.backend]; ok {
				pts = append(pts, spreadPoint{at: float64(j) + dodge(i, len(hostHolds), 0.3), d: d})
			}
		}
		if err := addSpread(p, &f.legend, h.name, h.look, spread{pts: pts}, false); err != nil {
			return figure{}, err
		}
	}
	p.NominalX(hostLabels(r)...)
	p.X.Min, p.X.Max = -0.5, float64(len(r.Busy.Rows))-0.5
	p.Y.Min = 0
	roundLinear(&p.Y)
	return f, nil
}

// drawHostCheck: the device-holder check alone, per way, against the
// host's size, on a log axis (the /proc walk is thousands of times the watch).
func drawHostCheck(r results) (figure, error) {
	f := newFigure("host-size-check.svg", lines(
		"How long does the device-holder check take as the host fills",
		"with processes, per way of checking?"), 8*vg.Inch, 5.2*vg.Inch)
	p := f.plot
	p.X.Label.Text = hostAxis
	p.Y.Label.Text = "time of one check, ms (log scale)"
	p.Y.Tick.Marker = logTicks{}
	p.Add(grid())
	for i, c := range hostChecks {
		var pts []spreadPoint
		for j, row := range r.Busy.Rows {
			if d, ok := row.CheckMS[c.way]; ok && d.Median > 0 {
				pts = append(pts, spreadPoint{at: float64(j) + dodge(i, len(hostChecks), 0.6), d: d})
			}
		}
		if len(pts) == 0 {
			continue
		}
		if err := addSpread(p, &f.legend, c.name, c.look, spread{pts: pts, logVals: true}, false); err != nil {
			return figure{}, err
		}
	}
	p.NominalX(hostLabels(r)...)
	p.X.Min, p.X.Max = -0.5, float64(len(r.Busy.Rows))-0.5
	roundDecades(&p.Y)
	return f, nil
}

// hostLabels name the rows: the host's size, and the idle host measured
// again last.
func hostLabels(r results) []string {
	labels := make([]string, len(r.Busy.Rows))
	for i, row := range r.Busy.Rows {
		labels[i] = plain(float64(row.Processes))
		if row.Again {
			labels[i] = "0, again last"
		}
	}
	return labels
}

// dodge is the offset of series i of n within a band of the given width
// around its place.
func dodge(i, n int, width float64) float64 {
	return width * ((float64(i)+0.5)/float64(n) - 0.5)
}
