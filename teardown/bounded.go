// bounded.go owns the teardown's walk when the kernel can answer for it: a
// tracker whose account names its members (tracker.Listed), the cgroup's
// own member list, and the payload's group signalled through its leader's
// pidfd (the kernel resolves the group's members). Then a pass reads only
// those processes' /proc entries, so its cost grows with the lineage and
// not with the host. Without any of the three, the pass walks /proc.
package teardown

import (
	"syscall"

	"github.com/gpu-hold/gpu-hold/proc"
	"github.com/gpu-hold/gpu-hold/tracker"
)

// groupByKernel reports whether the payload's group, if it has one that is
// targeted, can be signalled whole through its leader's pidfd.
func (td *Teardown) groupByKernel() bool {
	if td.PGID <= 0 || td.PGID == td.selfPGID {
		return true
	}
	return td.group != nil
}

// boundedSnapshot is the part of a walk of /proc a pass needs, read
// without the walk: the tracker's members, the cgroup's and the group's
// leader. ok is false when the kernel cannot answer for all of them.
func (td *Teardown) boundedSnapshot() (*proc.Snapshot, bool) {
	l, ok := td.Tracker.(tracker.Listed)
	if !ok || !td.groupByKernel() {
		return nil, false
	}
	members, ok := l.ListLive()
	if !ok {
		return nil, false
	}
	s := &proc.Snapshot{ByPID: make(map[int]proc.Stat, len(members)+1), Children: map[int][]int{}}
	put := func(st proc.Stat) {
		s.ByPID[st.PID] = st
		s.Children[st.PPID] = append(s.Children[st.PPID], st.PID)
	}
	for _, st := range members {
		put(st)
	}
	read := func(pid int) {
		if _, ok := s.ByPID[pid]; ok || pid <= 0 {
			return
		}
		if st, err := proc.ReadStat(pid); err == nil {
			put(st)
		}
	}
	if td.Cgroup != nil {
		for _, pid := range td.Cgroup.PIDs() {
			read(pid)
		}
	}
	read(td.PGID)
	return s, true
}

// termGroup sends TERM to the payload's whole group through its leader's
// pidfd, for a pass that did not walk /proc (so does not know the group's
// members outside the lineage and the cgroup). It reports whether the
// group got it: its members are then not sent TERM one by one again.
func (td *Teardown) termGroup() bool {
	if !td.bounded || td.group == nil || td.PGID <= 0 || td.PGID == td.selfPGID {
		return false
	}
	err := td.As.Do(func() error { return td.group.Signal(syscall.SIGTERM) })
	return err == nil || err == proc.ErrGone
}
