// stats.go owns the summary of repeated measurements: median, spread
// (min, max, p10, p90, p99) and ratios of medians. Single times are never
// reported on their own.
package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
)

// Dist summarises repeated measurements of one quantity (unit in the field name
// of whoever holds it, usually milliseconds).
type Dist struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	P10    float64 `json:"p10"`
	P90    float64 `json:"p90"`
	P99    float64 `json:"p99"`
}

// summarize returns the distribution of xs (NaNs dropped).
func summarize(xs []float64) Dist {
	v := make([]float64, 0, len(xs))
	for _, x := range xs {
		if !math.IsNaN(x) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return Dist{}
	}
	sort.Float64s(v)
	return Dist{N: len(v), Median: quantile(v, 0.5), Min: v[0], Max: v[len(v)-1],
		P10: quantile(v, 0.1), P90: quantile(v, 0.9), P99: quantile(v, 0.99)}
}

// quantile interpolates linearly between the closest ranks of sorted v.
func quantile(v []float64, q float64) float64 {
	if len(v) == 1 {
		return v[0]
	}
	pos := q * float64(len(v)-1)
	lo := int(math.Floor(pos))
	hi := int(math.Ceil(pos))
	return v[lo] + (v[hi]-v[lo])*(pos-float64(lo))
}

// medianCI is a bootstrap interval (level, e.g. 0.9) of the median of xs:
// the median of 2,000 resamples with replacement, seeded, so one run's
// numbers always give the same interval. NaNs are dropped; with fewer than
// two values there is no interval (NaN, NaN).
func medianCI(xs []float64, level float64) (lo, hi float64) {
	var clean []float64
	for _, x := range xs {
		if !math.IsNaN(x) {
			clean = append(clean, x)
		}
	}
	if len(clean) < 2 {
		return math.NaN(), math.NaN()
	}
	r := rand.New(rand.NewPCG(1, uint64(len(clean))))
	meds := make([]float64, 2000)
	s := make([]float64, len(clean))
	for i := range meds {
		for j := range s {
			s[j] = clean[r.IntN(len(clean))]
		}
		sort.Float64s(s)
		meds[i] = quantile(s, 0.5)
	}
	sort.Float64s(meds)
	return quantile(meds, (1-level)/2), quantile(meds, 1-(1-level)/2)
}

// pairedRatios is each repeat's ratio xs[i]/base[i]: the two were measured
// side by side, so the machine's drift across the run cancels.
func pairedRatios(xs, base []float64) []float64 {
	var rr []float64
	for i := range min(len(xs), len(base)) {
		rr = append(rr, ratio(xs[i], base[i]))
	}
	return rr
}

// ratio is a/b, NaN when b is not positive.
func ratio(a, b float64) float64 {
	if b <= 0 {
		return math.NaN()
	}
	return a / b
}

// String prints "median [min..max] (n)" with a precision that suits the size.
func (d Dist) String() string {
	if d.N == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%s [%s..%s] n=%d", num(d.Median), num(d.Min), num(d.Max), d.N)
}

// num prints x with three significant figures or so.
func num(x float64) string {
	switch {
	case math.IsNaN(x):
		return "n/a"
	case math.Abs(x) >= 100:
		return fmt.Sprintf("%.0f", x)
	case math.Abs(x) >= 10:
		return fmt.Sprintf("%.1f", x)
	default:
		return fmt.Sprintf("%.2f", x)
	}
}

// Num is a float that encodes NaN (not measured) as JSON null.
type Num float64

// MarshalJSON writes null for NaN and infinities.
func (n Num) MarshalJSON() ([]byte, error) {
	f := float64(n)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return []byte(fmt.Sprintf("%g", f)), nil
}
