// teardown.go owns the teardown figures: one per kind of tree, its time to
// end against its size, per way of ending it, beside the cgroup.kill floor.
package main

import (
	"fmt"
	"math"

	"gonum.org/v1/plot/vg"
)

// teardownModes are the ways a tree is ended, in the legend's order, with
// their look and their offset (in decades) so that bars at one size do not
// cover each other.
var teardownModes = []struct {
	mode, name string
	look       look
	dodge      float64
}{
	{"floor", "floor: one write to cgroup.kill (bare cgroup)", black, -0.075},
	{"pid-loop", "pid-loop: a pidfd SIGKILL per pid in cgroup.procs", grey, -0.025},
	{"proc", "gpu-hold proc (procfs backend)", blue, 0.025},
	{"bpf", "gpu-hold bpf (eBPF backend)", vermilion, 0.075},
}

// teardownKinds are the trees, one figure each: what they are and how the
// holds ran them.
var teardownKinds = []struct {
	shape, behavior, what string
}{
	{"wide", "term-ignoring", "a wide tree of TERM-ignoring processes (-g 0)"},
	{"bushy", "term-ignoring", "a bushy tree of TERM-ignoring processes (-g 0)"},
	{"wide", "cooperative", "a wide tree of processes that exit on TERM (-g 10s)"},
	{"bushy", "cooperative", "a bushy tree of processes that exit on TERM (-g 10s)"},
}

// drawTeardown: one figure per kind of tree the run measured.
func drawTeardown(r results) ([]figure, error) {
	var figs []figure
	for _, k := range teardownKinds {
		series := teardownSeries(r, k.shape, k.behavior)
		if len(series) == 0 {
			continue
		}
		f := newFigure(fmt.Sprintf("teardown-%s-%s.svg", k.shape, k.behavior), lines(
			"Ending "+k.what+":",
			"how long against its size, per way of ending it, beside the cgroup.kill floor?"), 8*vg.Inch, 5.5*vg.Inch)
		p := f.plot
		p.X.Label.Text = "processes in the tree (log scale)"
		p.Y.Label.Text = "time to end the tree, ms (log scale)"
		p.X.Tick.Marker, p.Y.Tick.Marker = logTicks{}, logTicks{}
		p.Add(grid())
		for _, m := range teardownModes {
			if pts := series[m.mode]; len(pts) > 0 {
				if err := addSpread(p, &f.legend, m.name, m.look, spread{pts: dodgeLog(pts, m.dodge), logAt: true, logVals: true}, true); err != nil {
					return nil, err
				}
			}
		}
		p.X.Min, p.X.Max = p.X.Min-0.1, p.X.Max+0.1
		roundDecades(&p.Y)
		figs = append(figs, f)
	}
	return figs, nil
}

// teardownSeries is, per mode, the tree's time at each size, sizes in order.
func teardownSeries(r results, shape, behavior string) map[string][]spreadPoint {
	series := map[string][]spreadPoint{}
	for _, c := range r.Teardown {
		if c.Shape != shape || c.Behavior != behavior {
			continue
		}
		for _, m := range c.Modes {
			if m.TimeMS.N > 0 && m.TimeMS.Median > 0 {
				series[m.Mode] = append(series[m.Mode], spreadPoint{at: float64(c.N), d: m.TimeMS})
			}
		}
	}
	for _, pts := range series {
		sortByAt(pts)
	}
	return series
}

// dodgeLog moves each point by decades on a log axis.
func dodgeLog(pts []spreadPoint, decades float64) []spreadPoint {
	out := make([]spreadPoint, len(pts))
	for i, p := range pts {
		out[i] = spreadPoint{at: p.at * math.Pow(10, decades), d: p.d}
	}
	return out
}
