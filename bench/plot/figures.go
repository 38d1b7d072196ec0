// figures.go owns the three figures: each is a gonum plot saved as SVG.
package main

import (
	"fmt"
	"math"
	"sort"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// drawTeardown: per tree (shape, behaviour), time to end it against its
// size, one line per mode (the cgroup.kill floor among them), log axes.
func drawTeardown(r results, path string) (bool, error) {
	if len(r.Teardown) == 0 {
		return false, nil
	}
	lines := map[string]plotter.XYs{}
	for _, c := range r.Teardown {
		for _, m := range c.Modes {
			if m.TimeMS.N == 0 || m.TimeMS.Median <= 0 {
				continue
			}
			mode := m.Mode
			if mode == "floor" {
				mode = "floor (cgroup.kill)"
			}
			key := fmt.Sprintf("%s, %s %s", mode, c.Shape, c.Behavior)
			lines[key] = append(lines[key], plotter.XY{X: float64(c.N), Y: m.TimeMS.Median})
		}
	}
	p := plot.New()
	p.Title.Text = "Teardown time against tree size"
	p.X.Label.Text = "processes in the tree"
	p.Y.Label.Text = "ms to end it (median)"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{}, plot.LogTicks{}
	if err := addLines(p, lines); err != nil {
		return false, err
	}
	return true, p.Save(8*vg.Inch, 5*vg.Inch, path)
}

// drawHostSize: `gpu-hold --device NODE -- true` per backend and the device
// check's ways against the processes on the host.
func drawHostSize(r results, path string) (bool, error) {
	if r.Busy == nil || len(r.Busy.Rows) == 0 {
		return false, nil
	}
	lines := map[string]plotter.XYs{}
	for _, row := range r.Busy.Rows {
		if row.Again {
			continue // a line drawn back to 0 would read as a host shrinking
		}
		for be, d := range row.HoldMS {
			lines["gpu-hold "+be+" -- true"] = append(lines["gpu-hold "+be+" -- true"], plotter.XY{X: float64(row.Processes), Y: d.Median})
		}
		for way, d := range row.CheckMS {
			name := checkNames[way]
			lines[name] = append(lines[name], plotter.XY{X: float64(row.Processes), Y: d.Median})
		}
	}
	p := plot.New()
	p.Title.Text = "A hold's cost against the host's size"
	p.X.Label.Text = "unrelated processes on the host (50 open files each)"
	p.Y.Label.Text = "ms (median)"
	if err := addLines(p, lines); err != nil {
		return false, err
	}
	return true, p.Save(8*vg.Inch, 5*vg.Inch, path)
}

// checkNames names the device check's ways in the legend.
var checkNames = map[string]string{
	"watch":         "device check: the openers' fd tables (device watch)",
	"watch-blocked": "device check by the watch, its holder asleep in a read",
	"kernel":        "device check: every fd table (BPF iterator)",
	"proc":          "device check: the /proc walk (fallback)",
}

// drawIdle: the device's idle time between two jobs, per chain: short
// payloads, then long first payloads on the idle and on the busy host; a
// dot at the median with a bar from min to max, on a log axis (flock's few
// milliseconds beside a busy host's device check).
func drawIdle(r results, path string) (bool, error) {
	groups, names := idleGroups(r)
	if len(groups) == 0 {
		return false, nil
	}
	p := plot.New()
	p.Title.Text = "Device idle between two jobs (median, min..max)"
	p.Y.Label.Text = "payload end to next start, ms"
	p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, ticks125{}
	step := 0.7 / float64(max(len(names), 1))
	top := 0.0
	for i, m := range names {
		var pts spread
		for j, g := range groups {
			if d, ok := g.ys[m]; ok && d.Median > 0 {
				pts = append(pts, spreadPoint{x: float64(j) - 0.35 + (float64(i)+0.5)*step, d: d})
				top = max(top, d.Max)
			}
		}
		if len(pts) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(pts)
		if err != nil {
			return false, err
		}
		sc.Color, sc.Shape = plotutil.Color(i), plotutil.Shape(i)
		eb, err := plotter.NewYErrorBars(pts)
		if err != nil {
			return false, err
		}
		eb.Color = plotutil.Color(i)
		p.Add(sc, eb)
		p.Legend.Add(m, sc)
	}
	labels := make([]string, len(groups))
	for i, g := range groups {
		labels[i] = g.label
	}
	p.NominalX(labels...)
	p.X.Min, p.X.Max = -0.5, float64(len(groups))-0.5
	p.Y.Max = top * 10 // room above every chain for the legend
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs = vg.Points(10)
	return true, p.Save(10*vg.Inch, 5*vg.Inch, path)
}

// idleGroup is one group of the idle figure: a chain's distribution by name.
type idleGroup struct {
	label string
	ys    map[string]dist
}

// idleGroups are the idle figure's groups and the chains' names in them.
func idleGroups(r results) ([]idleGroup, []string) {
	var groups []idleGroup
	if r.Handoff != nil && len(r.Handoff.Modes) > 0 {
		g := idleGroup{"short payloads", map[string]dist{}}
		for _, m := range r.Handoff.Modes {
			g.ys[m.Mode] = m.IdleMS
		}
		groups = append(groups, g)
	}
	for _, host := range []string{"idle", "busy"} {
		g := idleGroup{"long first payload, " + host + " host", map[string]dist{}}
		for _, m := range r.LongHandoff {
			if m.Host == host || (m.Host == "" && host == "idle") {
				g.ys[m.Mode] = m.IdleMS
				if m.Processes > 0 {
					g.label = fmt.Sprintf("long first payload, %d processes", m.Processes)
				}
			}
		}
		if len(g.ys) > 0 {
			groups = append(groups, g)
		}
	}
	modes := map[string]bool{}
	for _, g := range groups {
		for m := range g.ys {
			modes[m] = true
		}
	}
	return groups, sortedKeys(modes)
}

// ticks125 marks 1, 2 and 5 times each power of ten in range, labelled
// in plain numbers.
type ticks125 struct{}

func (ticks125) Ticks(min, max float64) []plot.Tick {
	var ts []plot.Tick
	for e := math.Floor(math.Log10(min)); math.Pow(10, e) <= max; e++ {
		for _, m := range []float64{1, 2, 5} {
			if v := m * math.Pow(10, e); v >= min && v <= max {
				ts = append(ts, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', -1, 64)})
			}
		}
	}
	return ts
}

// spread is points with a median and a min..max, for a scatter and its
// error bars.
type spread []spreadPoint

type spreadPoint struct {
	x float64
	d dist
}

func (s spread) Len() int                    { return len(s) }
func (s spread) XY(i int) (float64, float64) { return s[i].x, s[i].d.Median }

// YError is below and above the median: to min (kept above 0 for the log
// axis) and to max.
func (s spread) YError(i int) (float64, float64) {
	d := s[i].d
	lo := max(d.Min, d.Median/100)
	return d.Median - lo, max(d.Max-d.Median, 0)
}

// addLines adds one line with points per key, in key order, x sorted.
func addLines(p *plot.Plot, lines map[string]plotter.XYs) error {
	for i, k := range sortedKeys(lines) {
		pts := lines[k]
		sort.Slice(pts, func(a, b int) bool { return pts[a].X < pts[b].X })
		l, s, err := plotter.NewLinePoints(pts)
		if err != nil {
			return err
		}
		l.Color, s.Color = plotutil.Color(i), plotutil.Color(i)
		l.Dashes = plotutil.Dashes(i / 7)
		s.Shape = plotutil.Shape(i)
		p.Add(l, s)
		p.Legend.Add(k, l, s)
	}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	return nil
}
