// devfind.go wires the kernel into the device-holder check: the check asks
// the tracker package (the host's device watch, or a BPF iterator over every
// fd table) which processes have the device open, and reads only those;
// where it cannot answer, the check walks /proc as before.
package hold

import (
	"sync"

	"github.com/gpu-hold/gpu-hold/internal/cgroup"
	"github.com/gpu-hold/gpu-hold/internal/device"
	"github.com/gpu-hold/gpu-hold/tracker"
)

func init() { device.UseFinder(findDevicePIDs) }

// findDevicePIDs adapts tracker.FindDevicePIDs to device.Finder.
func findDevicePIDs(devs []device.DevNum, paths []string) ([]int, error) {
	td := make([]tracker.Dev, len(devs))
	for i, d := range devs {
		td[i] = tracker.Dev(d)
	}
	return tracker.FindDevicePIDs(td, paths, cgroupMount())
}

// cgroupMount is where the device watch's open hook attaches, read once.
var cgroupMount = sync.OnceValue(cgroup.Mount)
