// devices.go owns the kernel's answer to "which processes have these device
// nodes open" for the device-holder check: the host's device watch (bpf's
// Watch: the openers' fd tables, checked against the kernel's reference
// counts), else bpf's iter/task_file program over every fd table, used
// where this process may load tracing programs and sees the host's pids.
// The check itself, and its fallback (the walk of /proc), are package
// device's.
package tracker

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"

	"github.com/gpu-hold/gpu-hold/bpf"
)

// Dev is a device node's kind and number.
type Dev = bpf.Dev

// itersAllowed says, once per process, why the kernel's iterators (the
// device scan, the process groups) cannot be asked here (nil: they can): a
// failed attempt costs a load of the kernel's BTF, which a host that
// cannot load BPF at all should not pay on every scan.
var itersAllowed = sync.OnceValue(func() error {
	caps, err := EffectiveCaps()
	if err != nil {
		return err
	}
	if !caps.CanTrace() {
		return fmt.Errorf("%s; this process has %s", notPermitted, caps.String())
	}
	if err := CheckBTF(); err != nil {
		return err
	}
	return CheckHostPidNS()
})

// walkCheaperBelow is the host's task count under which a process that
// has not read the kernel's BTF, and finds no pinned device scan to open,
// walks /proc instead: reading the BTF costs more than walking a host of a
// few hundred processes.
const walkCheaperBelow = 300

// errSmallHost is FindDevicePIDs' answer on a host small enough to walk.
var errSmallHost = errors.New("the host is small enough that a walk of /proc costs less than loading a BPF iterator")

// FindDevicePIDs returns the tgid of every process that has one of devs
// open, from the kernel; paths are the nodes checked, and cgroupMount the
// cgroup v2 hierarchy the device watch's open hook is attached to ("": use
// no watch). An error says why the kernel could not answer, or should not:
// walk /proc instead.
func FindDevicePIDs(devs []Dev, paths []string, cgroupMount string) ([]int, error) {
	if err := itersAllowed(); err != nil {
		return nil, err
	}
	if !bpf.WatchPinned() && !bpf.KernelBTFRead() && !bpf.DevscanPinned() && hostTasks() < walkCheaperBelow {
		return nil, errSmallHost
	}
	return KernelDevicePIDs(devs, paths, cgroupMount)
}

// KernelDevicePIDs is FindDevicePIDs whatever the host's size: the host's
// device watch, or where it cannot be had, one pass over every fd table.
func KernelDevicePIDs(devs []Dev, paths []string, cgroupMount string) ([]int, error) {
	if err := itersAllowed(); err != nil {
		return nil, err
	}
	files, _, err := WatchDeviceFiles(devs, paths, cgroupMount)
	if err != nil {
		files, err = bpf.FindDeviceFiles(devs)
	}
	if err != nil {
		return nil, err
	}
	return pidsOf(files), nil
}

// ScanDevicePIDs is KernelDevicePIDs by the pass over every fd table
// alone (the bench compares the two).
func ScanDevicePIDs(devs []Dev) ([]int, error) {
	if err := itersAllowed(); err != nil {
		return nil, err
	}
	files, err := bpf.FindDeviceFiles(devs)
	if err != nil {
		return nil, err
	}
	return pidsOf(files), nil
}

// hostWatch is this process's handle on the host's device watch, opened
// (and, the first time on the host, attached and pinned) at its first use.
var hostWatch struct {
	sync.Mutex
	w   *bpf.Watch
	err error
}

// WatchDeviceFiles asks the host's device watch for the files of devs.
func WatchDeviceFiles(devs []Dev, paths []string, cgroupMount string) ([]bpf.DevFile, bpf.WatchAnswer, error) {
	hostWatch.Lock()
	if hostWatch.w == nil && hostWatch.err == nil {
		hostWatch.w, hostWatch.err = openHostWatch(cgroupMount)
	}
	w, err := hostWatch.w, hostWatch.err
	hostWatch.Unlock()
	if err != nil {
		return nil, bpf.WatchAnswer{}, err
	}
	return w.Find(devs, paths)
}

func openHostWatch(cgroupMount string) (*bpf.Watch, error) {
	if err := itersAllowed(); err != nil {
		return nil, err
	}
	if cgroupMount == "" {
		return nil, errors.New("no cgroup v2 hierarchy to attach the device watch's open hook to")
	}
	return bpf.OpenWatch(cgroupMount)
}

// pidsOf is the processes files name, each once.
func pidsOf(files []bpf.DevFile) []int {
	seen := make(map[int]bool, len(files))
	pids := make([]int, 0, len(files))
	for _, f := range files {
		if !seen[f.PID] {
			seen[f.PID] = true
			pids = append(pids, f.PID)
		}
	}
	return pids
}

// hostTasks is the number of tasks (threads) on the host, from
// /proc/loadavg ("0.00 0.01 0.05 1/123 4567"); a large number when it
// cannot be read, so that the kernel is asked.
func hostTasks() int {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 1 << 30
	}
	f := bytes.Fields(b)
	if len(f) < 4 {
		return 1 << 30
	}
	_, total, ok := bytes.Cut(f[3], []byte("/"))
	n, err := strconv.Atoi(string(total))
	if !ok || err != nil {
		return 1 << 30
	}
	return n
}

// DeviceWatchStatus is the host's pinned device watch as it stands.
func DeviceWatchStatus() (bpf.WatchStatus, error) { return bpf.ReadWatchStatus() }
