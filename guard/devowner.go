// devowner.go owns which queue's holder a pool's node belongs to: a node of
// one device of a pool is that device's holder's alone; a node every
// device needs (the pool's shared nodes, nvidiactl, kfd), or one of a
// resource without a pool, is any of the resource's holders'. Nodes are
// told apart by device number, read here, not by the path a scan names.
package guard

import (
	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/device"
)

// devQueues maps, per pool resource, a device number to the queue of the
// device whose own node it is.
type devQueues map[string]map[uint64]string

// poolQueues reads the device numbers of each pool device's own nodes.
func poolQueues(pools map[string]device.Pool) devQueues {
	out := devQueues{}
	for res, p := range pools {
		m := map[uint64]string{}
		for _, d := range p.Devices {
			for _, n := range d.Nodes {
				if rdev, ok := rdevOf(n); ok {
					m[rdev] = device.QueueName(res, d)
				}
			}
		}
		out[res] = m
	}
	return out
}

// owner is the queue whose holder may hold node of resource, or "" when
// any of the resource's holders may.
func (q devQueues) owner(resource, node string) string {
	m := q[resource]
	if len(m) == 0 {
		return ""
	}
	rdev, ok := rdevOf(node)
	if !ok {
		return ""
	}
	return m[rdev]
}

func rdevOf(path string) (uint64, bool) {
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR && st.Mode&unix.S_IFMT != unix.S_IFBLK {
		return 0, false
	}
	return st.Rdev, true
}
