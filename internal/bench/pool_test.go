// pool_test.go tests the pool section's arithmetic: the ideal schedule's
// utilisation and the measure from a payload log.
package main

import (
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestPoolIdealUtil(t *testing.T) {
	// The mix: 4x12s and 12 x 1x3s fit beside each other in 12s, then the
	// 8-device hold runs 2s alone: 100 device-seconds in 8 x 14.
	if got, want := idealUtil(poolMix()), 100.0/(8*14); math.Abs(got-want) > 1e-9 {
		t.Fatalf("ideal utilisation %v, want %v", got, want)
	}
	if got := idealUtil([]poolJob{{8, time.Second, 0}, {8, time.Second, 0}}); got != 1 {
		t.Fatalf("two full-pool holds back to back: %v, want 1", got)
	}
}

func TestPoolMeasure(t *testing.T) {
	log := filepath.Join(t.TempDir(), "inside.log")
	// Hold 0 (4 devices) inside 0..2s, hold 1 (8 devices) 2..3s.
	os.WriteFile(log, []byte("enter 0 1000000\nleave 0 3000000\nenter 1 3000000\nleave 1 4000000\n"), 0o644)
	var r PoolRun
	if err := poolMeasure(&r, []poolJob{{4, 0, 0}, {8, 0, 0}}, log); err != nil {
		t.Fatal(err)
	}
	if r.MakespanS != 3 || math.Abs(r.Utilisation-16.0/24) > 1e-9 || len(r.WideStartS) != 1 || r.WideStartS[0] != 2 {
		t.Fatalf("measured %+v", r)
	}
}
