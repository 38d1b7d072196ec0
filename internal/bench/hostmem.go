// hostmem.go owns reading what memory costs the host: the "Key: N kB"
// files of the kernel (/proc/meminfo, /proc/PID/smaps_rollup,
// /proc/PID/status), a process's proportional and private share of its
// pages, and the kernel's own allocations that grow with each process.
package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// kernelKeys are the lines of /proc/meminfo that hold what the kernel
// allocates for a process of its own (task, files and inodes in Slab, its
// stacks, its page tables), not pages the process maps.
var kernelKeys = []string{"Slab", "KernelStack", "PageTables"}

// parseKB reads the "Key: N kB" (or "Key: N") lines of a /proc file into
// KiB by key; lines that are not of that form are skipped.
func parseKB(data string) map[string]float64 {
	out := map[string]float64{}
	for _, l := range strings.Split(data, "\n") {
		key, rest, ok := strings.Cut(l, ":")
		if !ok || strings.ContainsAny(key, " \t") {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 || len(f) > 2 || (len(f) == 2 && f[1] != "kB") {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		out[key] = v
	}
	return out
}

// readKB is parseKB of a file (nil when it cannot be read).
func readKB(path string) map[string]float64 {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	return parseKB(string(data))
}

// readMeminfo reads /proc/meminfo after folding every CPU's pending counts
// into the totals (a read of vm/stat_refresh, root only): without it the
// totals lag the truth by seconds on an idle CPU.
func readMeminfo() map[string]float64 {
	os.ReadFile("/proc/sys/vm/stat_refresh")
	return readKB("/proc/meminfo")
}

// threadStackKiB is a thread's kernel stack (THREAD_SIZE on x86-64 and
// arm64 without KASAN).
const threadStackKiB = 16

// ownKernelKiB is the part of the kernel's memory that /proc/PID/status
// attributes to pid: its page tables (VmPTE) and one kernel stack per
// thread. Slab objects (task, files, inodes) are not attributed anywhere.
func ownKernelKiB(status map[string]float64) float64 {
	return status["VmPTE"] + status["Threads"]*threadStackKiB
}

// procMem is one process's memory in KiB: resident (RSS), its
// proportional share (PSS: each shared page divided among its sharers)
// and what no other process maps (private: USS).
type procMem struct{ RSS, PSS, Private float64 }

// smapsMem is procMem from the fields of /proc/PID/smaps_rollup.
func smapsMem(kb map[string]float64) (procMem, bool) {
	rss, ok1 := kb["Rss"]
	pss, ok2 := kb["Pss"]
	pc, ok3 := kb["Private_Clean"]
	pd, ok4 := kb["Private_Dirty"]
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return procMem{}, false
	}
	return procMem{RSS: rss, PSS: pss, Private: pc + pd}, true
}

// readProcMem reads pid's smaps_rollup.
func readProcMem(pid int) (procMem, error) {
	path := fmt.Sprintf("/proc/%d/smaps_rollup", pid)
	kb := readKB(path)
	m, ok := smapsMem(kb)
	if !ok {
		return m, fmt.Errorf("cannot read Rss, Pss and Private_* from %s (gone, or a kernel before 4.14)", path)
	}
	return m, nil
}

// kernelGrowth is by how much (KiB) each of kernelKeys grew from before to
// after, and their sum.
func kernelGrowth(before, after map[string]float64) (map[string]float64, float64) {
	d, sum := map[string]float64{}, 0.0
	for _, k := range kernelKeys {
		d[k] = after[k] - before[k]
		sum += d[k]
	}
	return d, sum
}
