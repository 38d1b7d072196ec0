// figures.go owns the three figures: each is a gonum plot saved as SVG.
package main

import (
	"fmt"
	"sort"

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
// check's two ways against the processes on the host.
func drawHostSize(r results, path string) (bool, error) {
	if r.Busy == nil || len(r.Busy.Rows) == 0 {
		return false, nil
	}
	lines := map[string]plotter.XYs{}
	for _, row := range r.Busy.Rows {
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

// checkNames names the device check's two ways in the legend.
var checkNames = map[string]string{"kernel": "device check: the kernel's fd tables (BPF)", "proc": "device check: the /proc walk (fallback)"}

// drawIdle: the device's idle time between two jobs, per chain, short
// payloads and long first payloads side by side.
func drawIdle(r results, path string) (bool, error) {
	var groups []struct {
		label string
		ys    map[string]float64
	}
	if r.Handoff != nil && len(r.Handoff.Modes) > 0 {
		ys := map[string]float64{}
		for _, m := range r.Handoff.Modes {
			ys[m.Mode] = m.IdleMS.Median
		}
		groups = append(groups, struct {
			label string
			ys    map[string]float64
		}{"short payloads", ys})
	}
	if len(r.LongHandoff) > 0 {
		ys := map[string]float64{}
		for _, m := range r.LongHandoff {
			ys[m.Mode] = m.IdleMS.Median
		}
		groups = append(groups, struct {
			label string
			ys    map[string]float64
		}{"long first payload", ys})
	}
	if len(groups) == 0 {
		return false, nil
	}
	modes := map[string]bool{}
	for _, g := range groups {
		for m := range g.ys {
			modes[m] = true
		}
	}
	p := plot.New()
	p.Title.Text = "Device idle between two jobs"
	p.Y.Label.Text = "payload end to next payload start, ms (median)"
	names := sortedKeys(modes)
	w := vg.Points(18)
	for i, m := range names {
		vals := make(plotter.Values, len(groups))
		for j, g := range groups {
			vals[j] = g.ys[m]
		}
		bars, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return false, err
		}
		bars.Color = plotutil.Color(i)
		bars.Offset = vg.Length(i-len(names)/2) * w
		p.Add(bars)
		p.Legend.Add(m, bars)
	}
	labels := make([]string, len(groups))
	for i, g := range groups {
		labels[i] = g.label
	}
	p.NominalX(labels...)
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs = vg.Points(40)
	return true, p.Save(8*vg.Inch, 5*vg.Inch, path)
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
