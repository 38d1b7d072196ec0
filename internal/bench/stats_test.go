package main

import (
	"encoding/json"
	"math"
	"testing"
)

func TestSummarize(t *testing.T) {
	d := summarize([]float64{5, 1, 4, 2, 3, math.NaN()})
	if d.N != 5 || d.Median != 3 || d.Min != 1 || d.Max != 5 {
		t.Fatalf("summarize = %+v", d)
	}
	if got := quantile([]float64{0, 10}, 0.9); got != 9 {
		t.Fatalf("p90 of {0,10} = %v, want 9", got)
	}
	if d := summarize(nil); d.N != 0 || d.String() != "n/a" {
		t.Fatalf("empty = %+v", d)
	}
}

// NaN ratios (not measured) must still encode: encoding/json refuses NaN.
func TestNumJSON(t *testing.T) {
	b, err := json.Marshal(struct{ A, B Num }{Num(math.NaN()), 1.5})
	if err != nil || string(b) != `{"A":null,"B":1.5}` {
		t.Fatalf("%s %v", b, err)
	}
}

// The bootstrap interval holds the median, is repeatable, narrows to the
// value for constant data and is absent for one value.
func TestMedianCI(t *testing.T) {
	xs := []float64{0.95, 1.01, 1.03, 0.99, 1.10, 1.02, 0.97, 1.05, 1.00, 1.04, math.NaN()}
	lo, hi := medianCI(xs, 0.9)
	med := summarize(xs).Median
	if !(lo <= med && med <= hi) || lo < 0.95 || hi > 1.10 || lo == hi {
		t.Fatalf("CI %v..%v for median %v", lo, hi, med)
	}
	if lo2, hi2 := medianCI(xs, 0.9); lo2 != lo || hi2 != hi {
		t.Fatalf("not repeatable: %v..%v then %v..%v", lo, hi, lo2, hi2)
	}
	if lo, hi := medianCI([]float64{2, 2, 2}, 0.9); lo != 2 || hi != 2 {
		t.Fatalf("constant data: %v..%v", lo, hi)
	}
	if lo, hi := medianCI([]float64{2}, 0.9); !math.IsNaN(lo) || !math.IsNaN(hi) {
		t.Fatalf("one value: %v..%v, want no interval", lo, hi)
	}
}

// Paired ratios divide each repeat by its own baseline, not by the
// baselines' median: a drift that slows both sides of a repeat cancels.
func TestPairedRatios(t *testing.T) {
	base := []float64{600, 1000, 800, 900}
	xs := []float64{720, 1200, 960, 1080, 5000} // the extra repeat has no baseline
	d := summarize(pairedRatios(xs, base))
	if d.N != 4 || d.Min < 1.2-1e-9 || d.Max > 1.2+1e-9 {
		t.Fatalf("ratios %+v, want four of 1.2", d)
	}
	// Paired by repeat, not by rank: the same times in another order give
	// other ratios.
	d = summarize(pairedRatios([]float64{1200, 720, 960, 1080}, base))
	if d.Min > 0.72+1e-9 || d.Max < 2-1e-9 {
		t.Fatalf("ratios %+v, want 0.72..2", d)
	}
}
