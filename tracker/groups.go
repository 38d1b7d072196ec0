// groups.go owns the kernel's answer to "which processes are in this
// process group" for the teardown (bpf's walk of the group's own list,
// instead of a read of every process's stat): with Lineage.Snapshot it
// lets a teardown pass read only the lineage, the group and the cgroup.
package tracker

import (
	"github.com/gpu-hold/gpu-hold/bpf"
)

// GroupMembers returns the tgid of every process in process group pgid.
// An error says why the kernel could not answer, or should not: walk
// /proc instead.
func GroupMembers(pgid int) ([]int, error) {
	if err := groupWalkWanted(); err != nil {
		return nil, err
	}
	return bpf.GroupMembers(pgid)
}

// PrepareGroupWalk opens (or loads) what GroupMembers will run, where it
// will run it: a hold calls it while its payload runs, so that the teardown
// between two jobs does not pay for it.
func PrepareGroupWalk() {
	if groupWalkWanted() == nil {
		bpf.OpenGroups()
	}
}

// groupWalkWanted says why GroupMembers would not ask the kernel: it may
// not, or the host is small enough that a walk of /proc costs less.
func groupWalkWanted() error {
	if err := itersAllowed(); err != nil {
		return err
	}
	if !bpf.GroupsReady() && hostTasks() < walkCheaperBelow {
		return errSmallHost
	}
	return nil
}
