// machine.go owns the description of the machine a run measured: kernel,
// CPUs, memory, limits and load, so a table is never read without it; and
// the wait for a quiet machine before each section.
package main

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Machine is where the numbers were measured.
type Machine struct {
	Kernel     string    `json:"kernel"`
	Host       string    `json:"host"`
	CPUs       int       `json:"cpus"`
	CPUModel   string    `json:"cpu_model"`
	MemTotalMB int       `json:"mem_total_mb"`
	PidMax     int       `json:"pid_max"`
	NoFile     uint64    `json:"rlimit_nofile"`
	GoVersion  string    `json:"go"`
	LoadBefore []float64 `json:"load_before"`
	LoadAfter  []float64 `json:"load_after"`
}

func machineInfo() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), LoadBefore: loadavg()}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	m.Host, _ = os.Hostname()
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(data), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemTotal:" {
				kb, _ := strconv.Atoi(f[1])
				m.MemTotalMB = kb / 1024
			}
		}
	}
	if data, err := os.ReadFile("/proc/sys/kernel/pid_max"); err == nil {
		m.PidMax, _ = strconv.Atoi(strings.TrimSpace(string(data)))
	}
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) == nil {
		m.NoFile = rl.Cur
	}
	return m
}

// loadavg is the 1, 5 and 15 minute load average.
func loadavg() []float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return nil
	}
	var out []float64
	for _, f := range strings.Fields(string(data))[:3] {
		v, _ := strconv.ParseFloat(f, 64)
		out = append(out, v)
	}
	return out
}

// settle waits, up to limit, until the machine is quiet: its CPUs at
// least 90% idle over two windows of 250 ms in a row. The sections before
// (10,000-process trees, thousands of spawns) leave the kernel reaping and
// freeing for a while; a section started meanwhile measures that, not
// itself.
func settle(limit time.Duration) (time.Duration, bool) {
	t0 := time.Now()
	calm := 0
	idle0, total0 := cpuTimes()
	for time.Since(t0) < limit {
		time.Sleep(250 * time.Millisecond)
		idle, total := cpuTimes()
		if total > total0 && float64(idle-idle0) >= 0.9*float64(total-total0) {
			calm++
		} else {
			calm = 0
		}
		idle0, total0 = idle, total
		if calm >= 2 {
			return time.Since(t0), true
		}
	}
	return time.Since(t0), false
}

// cpuTimes reads the idle (idle+iowait) and total jiffies of all CPUs from
// the "cpu" line of /proc/stat.
func cpuTimes() (idle, total uint64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	for i, f := range strings.Fields(line)[1:] {
		v, _ := strconv.ParseUint(f, 10, 64)
		total += v
		if i == 3 || i == 4 {
			idle += v
		}
	}
	return idle, total
}
