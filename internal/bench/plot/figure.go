// figure.go owns a figure's page: the plot, its legend below the data (never
// over it), the margins, and the check that no text is cut.
package main

import (
	"bytes"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// figure is one SVG file answering one question (its title).
type figure struct {
	name   string
	plot   *plot.Plot
	legend plot.Legend // drawn below the plot; empty: none
	note   string      // the legend's last line: how to read the marks
	w, h   vg.Length
}

const (
	margin = 12 // points around the page and between plot and legend
	// slack is how much wider than Liberation a viewer's fallback font
	// (DejaVu Sans: about 15%) may draw a text before it is cut.
	slack = 1.18
)

// newFigure is a figure with the house style: sans-serif text, sizes
// readable at the README's width, a title over one or more lines.
func newFigure(name, title string, w, h vg.Length) figure {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font = sans(13)
	p.Title.Padding = vg.Points(8)
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font = sans(11)
		a.Tick.Label.Font = sans(10)
		a.Label.Padding = vg.Points(4)
	}
	leg := plot.NewLegend()
	leg.TextStyle.Font = sans(10.5)
	leg.Top, leg.Left = true, true
	leg.Padding = vg.Points(3)
	leg.ThumbnailWidth = vg.Points(28)
	note := "dot: the median of the repeats; bar: from their min to their max"
	return figure{name: name, plot: p, legend: leg, note: note, w: w, h: h}
}

// sans is Liberation Sans, whose widths are Arial's and Helvetica's: the
// fonts a viewer without it most likely draws the text in.
func sans(size vg.Length) font.Font {
	return font.From(font.Font{Typeface: "Liberation", Variant: "Sans"}, size)
}

// save lays the figure out, checks that every text fits, and writes it.
func (f figure) save(dir string) error {
	c := vgsvg.New(f.w, f.h)
	page := draw.New(c)
	page.SetColor(color.White)
	page.Fill(page.Rectangle.Path())
	if f.note != "" {
		f.legend.Add(f.note)
	}
	legendH := f.legendHeight()
	area := draw.Crop(page, margin, -2*margin, legendH+margin, -margin)
	if err := f.fits(area); err != nil {
		return err
	}
	f.plot.Draw(area)
	data := f.plot.DataCanvas(area)
	legend := page
	legend.Rectangle = vg.Rectangle{
		Min: vg.Point{X: data.Min.X, Y: margin},
		Max: vg.Point{X: page.Max.X - margin, Y: margin + legendH},
	}
	f.legend.Draw(legend)
	var svg bytes.Buffer
	if _, err := c.WriteTo(&svg); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, f.name), withFallbacks(svg.Bytes()), 0o644)
}

// withFallbacks names, after Liberation Sans, the fonts of the same widths
// that a viewer without it has, then any sans-serif: a browser's default
// font otherwise (often a serif) would draw every text in it.
func withFallbacks(svg []byte) []byte {
	return bytes.ReplaceAll(svg, []byte("font-family:Liberation Sans;"),
		[]byte("font-family:'Liberation Sans',Arial,Helvetica,sans-serif;"))
}

// legendHeight is the strip below the plot the legend needs, 0 without one.
func (f figure) legendHeight() vg.Length {
	r := f.legend.Rectangle(draw.Canvas{})
	if r.Size().Y == 0 {
		return 0
	}
	return r.Size().Y + margin
}

// fits says which text of the figure would be cut, with slack for a
// fallback font, and by how much.
func (f figure) fits(area draw.Canvas) error {
	data := f.plot.DataCanvas(area)
	checks := []struct {
		what  string
		sty   text.Style
		txt   string
		width vg.Length
	}{
		{"title", f.plot.Title.TextStyle, f.plot.Title.Text, area.Size().X},
		{"x axis label", f.plot.X.Label.TextStyle, f.plot.X.Label.Text, data.Size().X},
		{"y axis label", f.plot.Y.Label.TextStyle, f.plot.Y.Label.Text, data.Size().Y},
	}
	for _, c := range checks {
		if w := c.sty.Width(c.txt) * slack; w > c.width {
			return fmt.Errorf("%s: the %s %q needs %.0f pt of %.0f: shorten it or widen the figure", f.name, c.what, c.txt, w, c.width)
		}
	}
	legW := f.legend.Rectangle(draw.Canvas{}).Size().X
	if room := area.Max.X + margin - data.Min.X; legW*slack > room {
		return fmt.Errorf("%s: the legend needs %.0f pt of %.0f: shorten its entries or widen the figure", f.name, legW*slack, room)
	}
	return nil
}

// lines joins a title's lines.
func lines(ls ...string) string { return strings.Join(ls, "\n") }
