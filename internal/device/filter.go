// filter.go owns the cgroup device filter of a pool hold: the device
// numbers of the pool's devices the hold was not given (minus any number a
// given device or a shared node also has), read from their nodes now, and
// the filter on the payload's cgroup that denies them (bpf/devfilter.bpf.c).
package device

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/bpf"
)

// Filter is a device filter attached to a payload's cgroup.
type Filter struct {
	f *bpf.DevFilter
	// Denied are the nodes denied, by path.
	Denied []string
}

// nodeID reads the device number of node path: ok is false for anything
// but a character or block device (a fake tree's file, a missing node).
func nodeID(path string) (bpf.DevID, bool) {
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil {
		return bpf.DevID{}, false
	}
	id := bpf.DevID{Major: unix.Major(st.Rdev), Minor: unix.Minor(st.Rdev)}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFCHR:
		id.Type = bpf.DevChar
	case unix.S_IFBLK:
		id.Type = bpf.DevBlock
	default:
		return bpf.DevID{}, false
	}
	return id, true
}

// DenyList is what a hold given idx of p must not open: the device numbers
// of the other devices' nodes, and their paths.
func DenyList(p Pool, idx []int) ([]bpf.DevID, []string) {
	allowed := map[bpf.DevID]bool{}
	given, _ := p.Pick(idx)
	for _, d := range given {
		for _, n := range d.Nodes {
			if id, ok := nodeID(n); ok {
				allowed[id] = true
			}
		}
	}
	for _, n := range p.Shared {
		if id, ok := nodeID(n); ok {
			allowed[id] = true
		}
	}
	var ids []bpf.DevID
	var paths []string
	seen := map[bpf.DevID]bool{}
	for _, d := range p.Others(idx) {
		for _, n := range d.Nodes {
			id, ok := nodeID(n)
			if !ok || allowed[id] || seen[id] {
				continue
			}
			seen[id] = true
			ids = append(ids, id)
			paths = append(paths, n)
		}
	}
	return ids, paths
}

// Fence attaches to the cgroup at cgroupDir a filter that denies a hold
// given idx of p the pool's other devices.
func Fence(cgroupDir string, p Pool, idx []int) (*Filter, error) {
	ids, paths := DenyList(p, idx)
	f, err := bpf.AttachDevFilter(cgroupDir, ids)
	if err != nil {
		return nil, fmt.Errorf("%w: the payload could open the pool's other devices", err)
	}
	return &Filter{f: f, Denied: paths}, nil
}

// Close detaches the filter; it is idempotent.
func (f *Filter) Close() error {
	if f == nil || f.f == nil {
		return nil
	}
	err := f.f.Close()
	f.f = nil
	return err
}
