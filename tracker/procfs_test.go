// procfs_test.go checks how the procfs backend paces its walks: by the CPU
// they cost the hold, never by the wall time a busy machine stretches
// them to.
package tracker

import (
	"testing"
	"time"
)

func TestWalkDelay(t *testing.T) {
	for cpu, want := range map[time.Duration]time.Duration{
		0:                     procWalkInterval,
		time.Millisecond:      procWalkInterval,
		40 * time.Millisecond: 800 * time.Millisecond,
		time.Second:           20 * time.Second,
	} {
		if got := walkDelay(cpu); got != want {
			t.Errorf("walkDelay(%v) = %v, want %v", cpu, got, want)
		}
	}
}

// A walk that waits (here: sleeps) costs no CPU, so it must not push the
// next walk back. Not parallel: the cost is the whole process's CPU.
func TestWalkCostIsCPU(t *testing.T) {
	cost := cpuCost(func() { time.Sleep(300 * time.Millisecond) })
	if cost >= 150*time.Millisecond {
		t.Fatalf("sleeping 300 ms cost %v: the walk's cost is wall time, not CPU", cost)
	}
	spun := cpuCost(func() {
		end, stop := holdCPU()+20*time.Millisecond, time.Now().Add(10*time.Second)
		for holdCPU() < end && time.Now().Before(stop) {
		}
	})
	if spun < 20*time.Millisecond {
		t.Fatalf("spinning for 20 ms of CPU cost %v", spun)
	}
}
