// walk.go owns the /proc walk: one pass over the numeric entries of /proc,
// reading only each process's stat file, spread over the CPUs when there
// are many (InParts, which the procfs tracker's mass reap uses too).
package proc

import (
	"os"
	"runtime"
	"strconv"
	"sync"
)

// parallelWalk is the process count from which a walk reads stats on
// several goroutines: a teardown's walk of a 10,000-process tree is the
// hold's critical path, and the CPUs are otherwise idle by then.
const parallelWalk = 2048

// Walk calls fn with the stat of every process in /proc; fn is called from
// the caller's goroutine only.
// Processes that vanish mid-walk are skipped. It reads nothing but stat.
func Walk(fn func(Stat)) error {
	d, err := os.Open("/proc")
	if err != nil {
		return err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil && len(names) == 0 {
		return err
	}
	pids := make([]int, 0, len(names))
	for _, name := range names {
		if name == "" || name[0] < '0' || name[0] > '9' {
			continue
		}
		if pid, err := strconv.Atoi(name); err == nil {
			pids = append(pids, pid)
		}
	}
	walkPids(pids, min(runtime.GOMAXPROCS(0), len(pids)/(parallelWalk/2)), fn)
	return nil
}

// walkPids reads the stats of pids on up to workers goroutines and calls fn
// with them, in the order of pids, from the caller's goroutine.
func walkPids(pids []int, workers int, fn func(Stat)) {
	if workers < 2 {
		readStats(pids, fn)
		return
	}
	parts := make([][]Stat, workers)
	InParts(len(pids), workers, func(part, lo, hi int) {
		out := make([]Stat, 0, hi-lo)
		readStats(pids[lo:hi], func(st Stat) { out = append(out, st) })
		parts[part] = out
	})
	for _, part := range parts {
		for _, st := range part {
			fn(st)
		}
	}
}

// InParts cuts n items into workers parts of (nearly) equal size and calls
// fn with each part's number and bounds [lo, hi), on its own goroutine,
// then waits for them all. With fewer than two workers it calls fn once,
// on the caller's goroutine.
func InParts(n, workers int, fn func(part, lo, hi int)) {
	if workers < 2 {
		fn(0, 0, n)
		return
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() { fn(w, n*w/workers, n*(w+1)/workers) })
	}
	wg.Wait()
}

// readStats calls fn with the stat of each pid still there.
func readStats(pids []int, fn func(Stat)) {
	for _, pid := range pids {
		if st, err := ReadStat(pid); err == nil {
			fn(st)
		}
	}
}
