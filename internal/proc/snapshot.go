// snapshot.go owns one walk of /proc shared by everything that needs it in
// a teardown pass: the lineage, the payload's group and its cgroup are all
// looked up in the same walk instead of each walking /proc again; or, where
// the kernel has named the processes that matter (its lists of children, a
// group, a cgroup), a read of those alone.
package proc

// Snapshot is every process seen by one walk of /proc, or the processes
// a pass chose to read.
type Snapshot struct {
	ByPID    map[int]Stat
	Children map[int][]int // parent pid -> child pids
	// Whole: a walk of every process, so a process alive all along that
	// it does not have is gone (a process born meanwhile may be missing).
	Whole bool
}

// TakeSnapshot walks /proc once.
func TakeSnapshot() (*Snapshot, error) {
	s := &Snapshot{ByPID: make(map[int]Stat, 512), Children: make(map[int][]int, 256), Whole: true}
	err := Walk(s.add)
	return s, err
}

// SnapshotOf reads the stat of each of pids still there (once each): a
// snapshot of those processes only, for a pass that knows whom to look at.
func SnapshotOf(pids []int) *Snapshot {
	s := &Snapshot{ByPID: make(map[int]Stat, len(pids)), Children: make(map[int][]int)}
	s.Read(pids)
	return s
}

// Read adds to s the stat of each of pids it does not have yet.
func (s *Snapshot) Read(pids []int) {
	for _, pid := range pids {
		if _, seen := s.ByPID[pid]; seen {
			continue
		}
		if st, err := ReadStat(pid); err == nil {
			s.add(st)
		}
	}
}

// add puts st in s, under its parent.
func (s *Snapshot) add(st Stat) {
	s.ByPID[st.PID] = st
	s.Children[st.PPID] = append(s.Children[st.PPID], st.PID)
}

// Get returns the stat of id when the snapshot has that very process alive.
func (s *Snapshot) Get(id Ident) (Stat, bool) {
	st, ok := s.ByPID[id.PID]
	if !ok || st.Start != id.Start || st.Dead() {
		return Stat{}, false
	}
	return st, true
}

// Descend visits, breadth first, every process below the given pids (not
// the pids themselves) and calls fn with each; fn returns false to not go
// below that process.
func (s *Snapshot) Descend(from []int, fn func(Stat) bool) {
	queue := append([]int(nil), from...)
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, c := range s.Children[pid] {
			st := s.ByPID[c]
			if fn(st) {
				queue = append(queue, c)
			}
		}
	}
}
