// holder.go owns a device holder: the record of one process that has a
// device node open, and the line that reports it. The line takes
// memfloor.FormatBytes, the one rendering of a size, so a holder's DRM
// memory and the memory floor read alike; that is all device uses of it.
package device

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gpu-hold/gpu-hold/internal/memfloor"
	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/termsafe"
)

// Holder is one process that has a device node open.
type Holder struct {
	proc.Ident        // pid and start time: the identity of the holder
	UID        int    `json:"uid"`            // effective uid
	User       string `json:"user,omitempty"` // its name, when it has one
	Command    string `json:"command"`        // cmdline, bounded ([comm] when empty)
	Node       string `json:"node"`           // the device node path it holds
	FDs        []int  `json:"fds"`            // its fds on that node
	// DRMDriver is the fdinfo drm-driver key, when the driver reports one.
	DRMDriver string `json:"drm_driver,omitempty"`
	// DRM is the memory the driver reports in /proc/PID/fdinfo, in bytes, by
	// key without the "drm-" prefix: "memory-vram", "total-gtt",
	// "resident-system0"... Fds of one DRM client (drm-client-id) count once.
	DRM map[string]uint64 `json:"drm,omitempty"`
}

// String describes the holder for a log line or a report.
func (h Holder) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "pid %d (start %d) uid %d", h.PID, h.Start, h.UID)
	if h.User != "" {
		fmt.Fprintf(&b, " (%s)", h.User)
	}
	// Its command line (and a node's path) is its user's text, shown to root.
	fmt.Fprintf(&b, " holds %s: %s", termsafe.Text(h.Node), termsafe.Text(h.Command))
	if len(h.DRM) > 0 {
		keys := make([]string, 0, len(h.DRM))
		for k := range h.DRM {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + " " + memfloor.FormatBytes(h.DRM[k])
		}
		fmt.Fprintf(&b, " [%s]", strings.Join(parts, ", "))
	}
	return b.String()
}
