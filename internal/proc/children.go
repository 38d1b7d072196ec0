// children.go owns the kernel's lists of a process's children
// (/proc/PID/task/TID/children, one per thread): the procfs tracker reads
// its own to find what it adopted, and a pass descends them from the hold
// to read its lineage alone instead of every process on the host.
package proc

import (
	"errors"
	"os"
	"runtime"
	"strconv"
	"sync"
	"syscall"
)

// ErrNoChildLists means the kernel keeps no children lists in /proc
// (built without CONFIG_PROC_CHILDREN): walk /proc instead.
var ErrNoChildLists = errors.New("this kernel has no /proc/PID/task/TID/children (CONFIG_PROC_CHILDREN): walking /proc instead")

// Children returns the pids of pid's children, read from every thread's
// list, the main thread's last: an orphan is handed to a subreaper's main
// thread, so a list read before it cannot hide one that moved meanwhile.
// ErrGone when pid is gone; ErrNoChildLists when the kernel keeps none.
func Children(pid int) ([]int, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	tids, err := Threads(pid)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, tid := range tids {
		kids, err := childList(dir + strconv.Itoa(tid) + "/children")
		if errors.Is(err, ErrNoChildLists) {
			return nil, err
		}
		out = append(out, kids...)
	}
	return out, nil
}

// Threads lists pid's thread ids, the main thread last; ErrGone when pid
// is gone.
func Threads(pid int) ([]int, error) {
	d, err := os.Open("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return nil, ErrGone
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil && len(names) == 0 {
		return nil, ErrGone
	}
	tids := make([]int, 0, len(names))
	hasMain := false
	for _, name := range names {
		tid, err := strconv.Atoi(name)
		switch {
		case err != nil:
		case tid == pid:
			hasMain = true
		default:
			tids = append(tids, tid)
		}
	}
	if hasMain {
		tids = append(tids, pid)
	}
	return tids, nil
}

// childList reads one thread's children file: space-separated pids.
func childList(path string) ([]int, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) && !childListsKept() {
			return nil, ErrNoChildLists
		}
		return nil, nil // the thread is gone: it has no children left
	}
	defer syscall.Close(fd)
	var out []int
	var buf [4096]byte
	num, in := 0, false
	for {
		n, err := syscall.Read(fd, buf[:])
		if err != nil || n <= 0 {
			break
		}
		for _, c := range buf[:n] {
			if c >= '0' && c <= '9' {
				num, in = num*10+int(c-'0'), true
				continue
			}
			if in {
				out = append(out, num)
			}
			num, in = 0, false
		}
	}
	if in {
		out = append(out, num)
	}
	return out, nil
}

// childListsKept reports whether this kernel keeps children lists: the
// calling thread's own list is there whenever the kernel has them.
var childListsKept = sync.OnceValue(func() bool {
	_, err := os.Stat("/proc/thread-self/children")
	return err == nil
})

// SnapshotFrom reads the processes top and everything below them,
// breadth first, from the children lists: each one's stat, and the lists
// of those alive. It costs the lineage, not the host. A list read while
// one of its children is reaped may omit a sibling for that read
// (proc_tid_children(5)); that sibling's parent, alive, is in the
// snapshot. A caller that must not miss a process confirms "nothing left"
// with an account that cannot (the procfs tracker's own children, among
// which every live descendant of a subreaper has an ancestor), and reads
// again.
func SnapshotFrom(top []int) *Snapshot {
	s := &Snapshot{ByPID: make(map[int]Stat, len(top)), Children: make(map[int][]int)}
	for level := top; len(level) > 0; {
		level = s.readLevel(level)
	}
	return s
}

// readLevel reads the stats of one level of the descent into s and
// returns the next level: the children of the live ones. A wide level
// is read on several goroutines, as a walk is. A pid s has already read
// is not read again (a process can be listed twice while it moves to the
// hold), so the descent reads each process once and ends.
func (s *Snapshot) readLevel(level []int) []int {
	type found struct {
		st   Stat
		kids []int
	}
	pids := make([]int, 0, len(level))
	for _, pid := range level {
		if _, seen := s.ByPID[pid]; !seen {
			pids = append(pids, pid)
		}
	}
	workers := min(runtime.GOMAXPROCS(0), len(pids)/(parallelWalk/2))
	parts := make([][]found, max(workers, 1))
	InParts(len(pids), workers, func(part, lo, hi int) {
		for _, pid := range pids[lo:hi] {
			st, err := ReadStat(pid)
			if err != nil {
				continue
			}
			f := found{st: st, kids: childrenOf(st)}
			parts[part] = append(parts[part], f)
		}
	})
	var next []int
	for _, part := range parts {
		for _, f := range part {
			if _, seen := s.ByPID[f.st.PID]; seen {
				continue // listed twice in this level
			}
			s.add(f.st)
			next = append(next, f.kids...)
		}
	}
	return next
}

// childrenOf reads the children of the process st was read from: none
// for a dead one; its main thread's list when it had one thread (what a
// thread made since the stat forks, a later read finds); else every
// thread's.
func childrenOf(st Stat) []int {
	switch {
	case st.Dead():
		return nil
	case st.Threads == 1:
		pid := strconv.Itoa(st.PID)
		kids, _ := childList("/proc/" + pid + "/task/" + pid + "/children")
		return kids
	}
	kids, _ := Children(st.PID)
	return kids
}
