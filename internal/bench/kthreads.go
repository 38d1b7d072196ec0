// kthreads.go owns the count of the host's kernel threads' CPU time: work
// no hold asked for that still takes the host's CPUs while holds run.
package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of /proc/PID/stat's utime and stime on Linux.
const userHZ = 100

// KThreadUse is what the kernel's own threads ran during a stretch of
// the bench.
type KThreadUse struct {
	WallMS    float64 `json:"wall_ms"`
	CPUMS     float64 `json:"cpu_ms"` // every kernel thread together
	Busiest   string  `json:"busiest"`
	BusiestMS float64 `json:"busiest_ms"`
}

// Share is the kernel threads' CPU time as a fraction of one CPU.
func (k *KThreadUse) Share() float64 { return ratio(k.CPUMS, k.WallMS) }

// kthreadTime is one kernel thread's name and CPU time (ms) so far.
type kthreadTime struct {
	comm string
	ms   float64
}

// kthreadTimes reads the CPU time of each child of kthreadd, keyed by pid
// (a worker's name changes with the queue it serves); a thread that ends
// between the list and its stat is left out.
func kthreadTimes() map[string]kthreadTime {
	out := map[string]kthreadTime{}
	list, err := os.ReadFile("/proc/2/task/2/children")
	if err != nil {
		return out
	}
	for _, pid := range strings.Fields(string(list)) {
		data, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil {
			continue
		}
		comm, cpu, ok := statCPU(string(data))
		if ok {
			out[pid] = kthreadTime{comm, cpu}
		}
	}
	return out
}

// statCPU reads the command name and utime+stime (ms) from one
// /proc/PID/stat line; the name is in parentheses and may hold spaces.
func statCPU(s string) (string, float64, bool) {
	open, shut := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || shut < open {
		return "", 0, false
	}
	f := strings.Fields(s[shut+1:]) // f[0] is field 3 (state); utime, stime are 14, 15
	if len(f) < 13 {
		return "", 0, false
	}
	u, errU := strconv.ParseFloat(f[11], 64)
	k, errK := strconv.ParseFloat(f[12], 64)
	if errU != nil || errK != nil {
		return "", 0, false
	}
	return s[open+1 : shut], (u + k) * 1000 / userHZ, true
}

// kthreadUse is the difference of two kthreadTimes over wall.
// A thread born in between counts from zero.
func kthreadUse(before, after map[string]kthreadTime, wall time.Duration) *KThreadUse {
	k := &KThreadUse{WallMS: ms(wall)}
	for pid, t := range after {
		d := t.ms - before[pid].ms
		k.CPUMS += d
		if d > k.BusiestMS {
			k.Busiest, k.BusiestMS = t.comm, d
		}
	}
	return k
}

// A host just filled with thousands of processes keeps a memory monitor
// (DAMON's kdamond, where the image runs one) busy for a minute or more
// while it learns the new memory: the bench's own start-up, not a busy
// host's steady state. kernelCalm waits until the kernel threads use less
// than calmShare of a CPU over calmWindow, within limit.
const (
	calmShare  = 0.25
	calmWindow = 5 * time.Second
)

// Calm is how long a row waited for the kernel threads to calm, and what
// they used in the last window waited.
type Calm struct {
	WaitedS float64 `json:"waited_s"`
	Share   float64 `json:"share"` // of one CPU, in the last window
	Calm    bool    `json:"calm"`  // false: limit reached first
}

func kernelCalm(limit time.Duration) Calm {
	t0 := time.Now()
	for {
		k0, w0 := kthreadTimes(), time.Now()
		time.Sleep(calmWindow)
		share := kthreadUse(k0, kthreadTimes(), time.Since(w0)).Share()
		calm := share < calmShare
		if calm || time.Since(t0) >= limit {
			return Calm{WaitedS: time.Since(t0).Seconds(), Share: share, Calm: calm}
		}
	}
}

func (c Calm) String() string {
	verdict := "calm"
	if !c.Calm {
		verdict = "not calm at the bound"
	}
	return fmt.Sprintf("%s s (%s: %s%% of a CPU in the last %s)", num(c.WaitedS), verdict, num(100*c.Share), calmWindow)
}
