// kthreads_test.go checks the kernel threads' CPU count against a thread
// that is always there, and the arithmetic of the difference.
package main

import (
	"os"
	"testing"
	"time"
)

func TestKthreadTimesFindsKernelThreads(t *testing.T) {
	ts := kthreadTimes()
	if len(ts) == 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("no kernel threads read from /proc/2/task/2/children: CI's kernels have CONFIG_PROC_CHILDREN, so the count is broken")
		}
		t.Skip("skipped because /proc/2/task/2/children is missing here: the kernel lacks CONFIG_PROC_CHILDREN")
	}
	sum := 0.0
	for pid, kt := range ts {
		if kt.comm == "" || kt.ms < 0 {
			t.Fatalf("pid %s: %+v, want a name and a time >= 0", pid, kt)
		}
		sum += kt.ms
	}
	if sum == 0 { // a booted kernel's workers and softirq threads have run
		t.Fatalf("%d kernel threads and none has used any CPU: utime and stime were misread", len(ts))
	}
}

func TestStatCPUReadsUtimeAndStime(t *testing.T) {
	line := "108 (kdamond.0 x) S 2 0 0 0 -1 2129984 0 0 0 0 3301 57 0 0 20 0 1 0 5 0 0 18446744073709551615\n"
	comm, cpu, ok := statCPU(line)
	if !ok || comm != "kdamond.0 x" || cpu != 33580 {
		t.Fatalf("got %q %v ms %v, want \"kdamond.0 x\", (3301+57) ticks = 33580 ms", comm, cpu, ok)
	}
	if _, _, ok := statCPU("108 (short) S 2"); ok {
		t.Fatal("a truncated stat line was read as one")
	}
}

func TestKthreadUseTakesDifferences(t *testing.T) {
	before := map[string]kthreadTime{"108": {"kdamond.0", 40}, "9": {"kworker/0:1-events", 10}}
	after := map[string]kthreadTime{
		"108": {"kdamond.0", 1040},
		"9":   {"kworker/0:1-mm_percpu_wq", 30}, // renamed: the same thread
		"77":  {"kworker/1:2", 5},               // born in between
	}
	k := kthreadUse(before, after, 2*time.Second)
	if k.CPUMS != 1025 || k.Busiest != "kdamond.0" || k.BusiestMS != 1000 {
		t.Fatalf("got %+v, want 1025 ms in all, kdamond.0 the busiest with 1000", k)
	}
	if s := k.Share(); s < 0.51 || s > 0.52 {
		t.Fatalf("share %v, want 1025/2000", s)
	}
}
