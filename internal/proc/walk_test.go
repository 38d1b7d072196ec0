// walk_test.go checks that a walk spread over goroutines reads the same
// processes, in the same order, as one goroutine does, and skips a pid that
// is not there.
package proc

import (
	"os"
	"slices"
	"testing"
)

func TestWalkPidsParallelSameAsSerial(t *testing.T) {
	pids := []int{os.Getpid(), 1, 1 << 30, os.Getppid(), os.Getpid()}
	var serial, parallel []int
	walkPids(pids, 1, func(st Stat) { serial = append(serial, st.PID) })
	walkPids(pids, 3, func(st Stat) { parallel = append(parallel, st.PID) })
	want := []int{os.Getpid(), 1, os.Getppid(), os.Getpid()}
	if !slices.Equal(serial, want) || !slices.Equal(parallel, want) {
		t.Fatalf("serial walk gave %v, parallel %v; want %v", serial, parallel, want)
	}
}
