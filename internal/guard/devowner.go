// devowner.go owns which queue's holder a pool's node belongs to: a node of
// one device of a pool is that device's holder's alone; a node every
// device needs (the pool's shared nodes, nvidiactl, kfd), or one of a
// resource without a pool, is any of the resource's holders'. Nodes are
// told apart by device number, read here, not by the path a scan names.
package guard

import (
	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/device"
)

// devQueues is, per pool resource, its pool: whose each device's own
// nodes are.
type devQueues map[string]device.Pool

// owner is the queue whose holder may hold node of resource, or "" when
// any of the resource's holders may. The device numbers are read now: a
// driver reload may have renumbered the nodes since the guard started.
func (q devQueues) owner(resource, node string) string {
	p, ok := q[resource]
	if !ok {
		return ""
	}
	rdev, ok := rdevOf(node)
	if !ok {
		return ""
	}
	for _, d := range p.Devices {
		for _, n := range d.Nodes {
			if r, ok := rdevOf(n); ok && r == rdev {
				return device.QueueName(resource, d)
			}
		}
	}
	return ""
}

func rdevOf(path string) (uint64, bool) {
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR && st.Mode&unix.S_IFMT != unix.S_IFBLK {
		return 0, false
	}
	return st.Rdev, true
}
