// devfind.go wires the kernel's fd tables into the device-holder check: the
// check asks the tracker package's BPF iterator which processes have the
// device open, and reads only those; where it cannot answer, the check
// walks /proc as before.
package hold

import (
	"github.com/gpu-hold/gpu-hold/device"
	"github.com/gpu-hold/gpu-hold/tracker"
)

func init() { device.UseFinder(findDevicePIDs) }

// findDevicePIDs adapts tracker.FindDevicePIDs to device.Finder.
func findDevicePIDs(devs []device.DevNum) ([]int, error) {
	td := make([]tracker.Dev, len(devs))
	for i, d := range devs {
		td[i] = tracker.Dev(d)
	}
	return tracker.FindDevicePIDs(td)
}
