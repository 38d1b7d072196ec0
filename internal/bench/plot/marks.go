// marks.go owns how a series looks: its colour and glyph, a median with
// its min..max bar, the grid behind them.
package main

import (
	"image/color"
	"math"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// look is one series' colour, glyph and line dashes. The colours are
// Okabe and Ito's, told apart with most colour-vision deficiencies.
type look struct {
	color  color.Color
	glyph  draw.GlyphDrawer
	dashes []vg.Length
}

var (
	black     = look{color.RGBA{0, 0, 0, 255}, draw.CircleGlyph{}, nil}
	grey      = look{color.RGBA{120, 120, 120, 255}, draw.SquareGlyph{}, []vg.Length{vg.Points(4), vg.Points(3)}}
	blue      = look{color.RGBA{0, 114, 178, 255}, draw.TriangleGlyph{}, nil}
	vermilion = look{color.RGBA{213, 94, 0, 255}, draw.PyramidGlyph{}, nil}
	green     = look{color.RGBA{0, 158, 115, 255}, draw.CircleGlyph{}, nil}
	skyBlue   = look{color.RGBA{86, 180, 233, 255}, draw.SquareGlyph{}, nil}
	orange    = look{color.RGBA{230, 159, 0, 255}, draw.TriangleGlyph{}, nil}
	purple    = look{color.RGBA{204, 121, 167, 255}, draw.PyramidGlyph{}, nil}
)

// spreadPoint is one median with its min..max, at a place on the other axis.
type spreadPoint struct {
	at float64
	d  dist
}

// spread is a series of medians with their min..max: places on x and
// values on y, or the other way when horizontal. Either may be drawn in
// decades (log10) on a linear axis: gonum's log scale misplaces the room
// it keeps for the axis label and squeezes the data.
type spread struct {
	pts            []spreadPoint
	horizontal     bool
	logAt, logVals bool
}

func (s spread) Len() int { return len(s.pts) }

func (s spread) XY(i int) (float64, float64) {
	at, v := scaled(s.pts[i].at, s.logAt), scaled(s.pts[i].d.Median, s.logVals)
	if s.horizontal {
		return v, at
	}
	return at, v
}

func (s spread) XError(i int) (float64, float64) { return s.reach(i) }
func (s spread) YError(i int) (float64, float64) { return s.reach(i) }

// reach is the bar's length below the median, to min (kept above 0 for a
// log axis), and above it, to max.
func (s spread) reach(i int) (float64, float64) {
	d := s.pts[i].d
	m := scaled(d.Median, s.logVals)
	return m - scaled(max(d.Min, d.Median/100), s.logVals), scaled(max(d.Max, d.Median), s.logVals) - m
}

// scaled is v in decades on a log axis.
func scaled(v float64, log bool) float64 {
	if log {
		return math.Log10(v)
	}
	return v
}

// addSpread draws a series' medians (joined by a line when joined) with
// their bars and adds it to the legend under name (none when "").
func addSpread(p *plot.Plot, leg *plot.Legend, name string, lk look, s spread, joined bool) error {
	thumbs := []plot.Thumbnailer{}
	if joined {
		l, err := plotter.NewLine(s)
		if err != nil {
			return err
		}
		l.Color, l.Width, l.Dashes = lk.color, vg.Points(1.2), lk.dashes
		p.Add(l)
		thumbs = append(thumbs, l)
	}
	bars, err := errorBars(s)
	if err != nil {
		return err
	}
	sc, err := plotter.NewScatter(s)
	if err != nil {
		return err
	}
	sc.Color, sc.Shape, sc.Radius = lk.color, lk.glyph, vg.Points(3.5)
	p.Add(bars.withColor(lk.color), sc)
	if name != "" {
		leg.Add(name, append(thumbs, sc)...)
	}
	return nil
}

// errorBars are a series' min..max bars, vertical or horizontal.
func errorBars(s spread) (coloredBars, error) {
	if s.horizontal {
		b, err := plotter.NewXErrorBars(s)
		return xBars{b}, err
	}
	b, err := plotter.NewYErrorBars(s)
	return yBars{b}, err
}

type coloredBars interface {
	withColor(color.Color) plot.Plotter
}
type xBars struct{ *plotter.XErrorBars }
type yBars struct{ *plotter.YErrorBars }

func (b xBars) withColor(c color.Color) plot.Plotter {
	b.Color, b.Width, b.CapWidth = c, vg.Points(1), vg.Points(6)
	return b.XErrorBars
}
func (b yBars) withColor(c color.Color) plot.Plotter {
	b.Color, b.Width, b.CapWidth = c, vg.Points(1), vg.Points(6)
	return b.YErrorBars
}

// grid is a light grid behind the data.
func grid() *plotter.Grid {
	g := plotter.NewGrid()
	g.Vertical.Color = color.Gray{Y: 215}
	g.Horizontal.Color = color.Gray{Y: 215}
	return g
}

// sortByAt puts points in order of their place.
func sortByAt(pts []spreadPoint) {
	sort.Slice(pts, func(a, b int) bool { return pts[a].at < pts[b].at })
}
