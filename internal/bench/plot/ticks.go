// ticks.go owns the axes' ticks: where they fall, their labels in plain
// numbers, and axis ranges widened to a labelled tick.
package main

import (
	"math"
	"strconv"

	"gonum.org/v1/plot"
)

// logTicks marks an axis drawn in decades: 1, 2 and 5 times each power
// of ten in range, labelled in plain numbers; beyond four decades only the
// powers of ten are labelled.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	few := hi-lo <= 4
	var ts []plot.Tick
	for e := math.Floor(lo); e <= hi; e++ {
		for m := 1.0; m < 10; m++ {
			v := m * math.Pow(10, e)
			if at := math.Log10(v); at >= lo-1e-9 && at <= hi+1e-9 {
				t := plot.Tick{Value: at}
				if m == 1 || (few && (m == 2 || m == 5)) {
					t.Label = plain(v)
				}
				ts = append(ts, t)
			}
		}
	}
	return ts
}

// linearTicks marks a linear axis every 1, 2 or 5 times a power of ten,
// so that about six are labelled, in plain numbers.
type linearTicks struct{}

func (linearTicks) Ticks(lo, hi float64) []plot.Tick {
	step := niceStep(lo, hi)
	var ts []plot.Tick
	for v := math.Ceil(lo/step) * step; v <= hi+step/1e6; v += step {
		ts = append(ts, plot.Tick{Value: v, Label: plain(math.Round(v/step) * step)})
	}
	return ts
}

// niceStep is 1, 2 or 5 times a power of ten, about a sixth of hi-lo.
func niceStep(lo, hi float64) float64 {
	raw := (hi - lo) / 6
	e := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5} {
		if m*e >= raw {
			return m * e
		}
	}
	return 10 * e
}

// roundLinear widens a linear axis to its outer ticks, so that no mark
// sits on the frame and the largest value has a labelled tick above it.
func roundLinear(a *plot.Axis) {
	step := niceStep(a.Min, a.Max)
	a.Min, a.Max = math.Floor(a.Min/step)*step, math.Ceil(a.Max/step)*step
}

// roundDecades widens an axis drawn in decades to the nearest labelled
// ticks of logTicks outside its range.
func roundDecades(a *plot.Axis) {
	marks := []float64{1}
	if a.Max-a.Min <= 4 {
		marks = []float64{1, 2, 5}
	}
	lo, hi := math.Inf(-1), math.Inf(1)
	for e := math.Floor(a.Min) - 1; e <= math.Ceil(a.Max)+1; e++ {
		for _, m := range marks {
			at := math.Log10(m * math.Pow(10, e))
			if at <= a.Min+1e-9 {
				lo = at
			}
			if at >= a.Max-1e-9 && at < hi {
				hi = at
			}
		}
	}
	a.Min, a.Max = lo, hi
}

// plain writes v without an exponent, a whole number's thousands grouped:
// 20,000 not 2e+04.
func plain(v float64) string {
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if v < 1000 || v != math.Trunc(v) {
		return s
	}
	return group(s)
}

// group puts a comma between each three digits of an integer's string.
func group(s string) string {
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}
