// idle.go owns the hand-off figures: the device's idle time between two jobs
// per chain, after short payloads and after a long one.
package main

import (
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// drawIdle: the short payloads' figure and the long payload's figure.
func drawIdle(r results) ([]figure, error) {
	var figs []figure
	if r.Handoff != nil && len(r.Handoff.Modes) > 0 {
		f, err := drawIdleShort(r)
		if err != nil {
			return nil, err
		}
		figs = append(figs, f)
	}
	if len(r.LongHandoff) > 0 {
		f, err := drawIdleLong(r)
		if err != nil {
			return nil, err
		}
		figs = append(figs, f)
	}
	return figs, nil
}

// drawIdleShort: section 4's chains of short payloads, one row each, flock
// on top; one series, so no legend.
func drawIdleShort(r results) (figure, error) {
	f := newFigure("idle-short.svg", lines(
		"In a queue of 30 short jobs (or 100), how long is the device idle",
		"between one job's end and the next one's start, per chain?"), 8*vg.Inch, 4.2*vg.Inch)
	p := f.plot
	p.X.Label.Text = "one payload's end to the next one's start, ms (log scale)"
	p.X.Tick.Marker = logTicks{}
	p.Add(grid())
	modes := r.Handoff.Modes
	names := make([]string, len(modes))
	var pts []spreadPoint
	for i, m := range modes {
		row := len(modes) - 1 - i // the first chain on top
		names[row] = chainName(m.Mode)
		if m.IdleMS.Median > 0 {
			pts = append(pts, spreadPoint{at: float64(row), d: m.IdleMS})
		}
	}
	if err := addSpread(p, &f.legend, "", black, spread{pts: pts, horizontal: true, logVals: true}, false); err != nil {
		return figure{}, err
	}
	p.NominalY(names...)
	p.Y.Min, p.Y.Max = -0.5, float64(len(modes))-0.5
	roundDecades(&p.X)
	return f, nil
}

// drawIdleLong: a 2 s first payload, per chain, on the idle host and the
// busy one, beside each host's target of twice flock's chain.
func drawIdleLong(r results) (figure, error) {
	f := newFigure("idle-long.svg", lines(
		"After a 2 s job, how long is the device idle before the next one",
		"starts, per chain, on an idle host and on a busy one?"), 8*vg.Inch, 4.8*vg.Inch)
	p := f.plot
	p.X.Label.Text = "the first payload's end to the second one's start, ms"
	p.X.Tick.Marker = linearTicks{}
	p.Add(grid())
	chains := longChains(r)
	names := make([]string, len(chains))
	for i, c := range chains {
		names[len(chains)-1-i] = chainName(c)
	}
	for i, h := range longHosts(r) {
		var pts []spreadPoint
		for j, c := range chains {
			if d, ok := h.idle[c]; ok && d.Median > 0 {
				pts = append(pts, spreadPoint{at: float64(len(chains)-1-j) - dodge(i, 2, 0.4), d: d})
			}
		}
		if err := addSpread(p, &f.legend, h.name, h.look, spread{pts: pts, horizontal: true}, false); err != nil {
			return figure{}, err
		}
		if flock, ok := h.idle["flock"]; ok {
			if err := addBound(p, &f.legend, "target: twice flock(1)'s chain, "+h.short, h.look, 2*flock.Median, len(chains)); err != nil {
				return figure{}, err
			}
		}
	}
	p.NominalY(names...)
	p.Y.Min, p.Y.Max = -0.5, float64(len(chains))-0.5
	p.X.Min = 0
	roundLinear(&p.X)
	return f, nil
}

// longHost is one host's idle times by chain.
type longHost struct {
	name, short string
	look        look
	idle        map[string]dist
}

// longHosts are the idle host, then the busy one, as measured.
func longHosts(r results) []longHost {
	hosts := []longHost{
		{"idle host", "idle host", blue, map[string]dist{}},
		{"busy host", "busy host", vermilion, map[string]dist{}},
	}
	for _, m := range r.LongHandoff {
		h := &hosts[0]
		if m.Host == "busy" {
			h = &hosts[1]
			if m.Processes > 0 {
				h.name = "busy host: " + plain(float64(m.Processes)) + " unrelated processes, 50 open files each"
			}
		}
		h.idle[m.Mode] = m.IdleMS
	}
	if len(hosts[1].idle) == 0 {
		hosts = hosts[:1]
	}
	return hosts
}

// longChains are the long hand-off's chains in the order measured.
func longChains(r results) []string {
	var chains []string
	seen := map[string]bool{}
	for _, m := range r.LongHandoff {
		if !seen[m.Mode] {
			seen[m.Mode] = true
			chains = append(chains, m.Mode)
		}
	}
	return chains
}

// addBound draws a dashed vertical line at x across every row.
func addBound(p *plot.Plot, leg *plot.Legend, name string, lk look, x float64, rows int) error {
	l, err := plotter.NewLine(plotter.XYs{{X: x, Y: -0.5}, {X: x, Y: float64(rows) - 0.5}})
	if err != nil {
		return err
	}
	l.Color, l.Width, l.Dashes = lk.color, vg.Points(1), []vg.Length{vg.Points(5), vg.Points(3)}
	p.Add(l)
	leg.Add(name, l)
	return nil
}

// chainName is a chain's name as the bench's tables print it, flock(1)
// named as the command.
func chainName(mode string) string {
	if mode == "flock" {
		return "flock(1)"
	}
	return mode
}
