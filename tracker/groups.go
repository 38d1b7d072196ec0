// groups.go owns the kernel's answer to "which processes are in this
// process group" for the teardown: bpf's iter/task program, one pass over
// the kernel's task list instead of a read of every process's stat, used
// where the tracker's own members come from the kernel too (eBPF), so that
// a teardown pass reads only the lineage, the group and the cgroup.
package tracker

import "github.com/gpu-hold/gpu-hold/bpf"

// GroupMembers returns the tgid of every process in process group pgid.
// An error says why the kernel could not answer, or should not: walk
// /proc instead.
func GroupMembers(pgid int) ([]int, error) {
	if err := itersAllowed(); err != nil {
		return nil, err
	}
	if !bpf.GroupsReady() && hostTasks() < walkCheaperBelow {
		return nil, errSmallHost
	}
	return bpf.GroupMembers(pgid)
}

// KernelListed reports whether tr's members come from the kernel's own
// account (the eBPF lineage map), read one by one, so that a teardown
// pass does not need a walk of /proc to find them.
func KernelListed(tr Tracker) bool {
	switch t := tr.(type) {
	case *bpfTracker, *pinnedTracker:
		return true
	case interface{ KernelListed() bool }: // a test's tracker
		return t.KernelListed()
	}
	return false
}
