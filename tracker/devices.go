// devices.go owns the kernel's answer to "which processes have these device
// nodes open" for the device-holder check: bpf's iter/task_file program,
// used where this process may load tracing programs and sees the host's
// pids. The check itself, and its fallback (the walk of /proc), are package
// device's.
package tracker

import (
	"fmt"
	"sync"

	"github.com/gpu-hold/gpu-hold/bpf"
)

// Dev is a device node's kind and number.
type Dev = bpf.Dev

// devscanAllowed says, once per process, why the kernel cannot be asked
// here (nil: it can): a failed attempt costs a load of the kernel's BTF,
// which a host that cannot load BPF at all should not pay on every scan.
var devscanAllowed = sync.OnceValue(func() error {
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

// FindDevicePIDs returns the tgid of every process that has one of devs
// open, read from the kernel's fd tables in one pass. An error says why the
// kernel could not answer: walk /proc instead.
func FindDevicePIDs(devs []Dev) ([]int, error) {
	if err := devscanAllowed(); err != nil {
		return nil, err
	}
	files, err := bpf.FindDeviceFiles(devs)
	if err != nil {
		return nil, err
	}
	seen := make(map[int]bool, len(files))
	pids := make([]int, 0, len(files))
	for _, f := range files {
		if !seen[f.PID] {
			seen[f.PID] = true
			pids = append(pids, f.PID)
		}
	}
	return pids, nil
}
