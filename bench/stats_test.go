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
