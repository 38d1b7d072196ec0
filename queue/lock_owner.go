// lock_owner.go owns finding who holds a flock now where /proc/locks
// names a process that does not. The kernel keeps the pid of the process
// that took the lock, and the lock belongs to the open file: the taker may
// have exited with the file still open elsewhere (the shell's
// `exec 9>f; flock 9` takes it in flock(1), and the shell holds it on),
// and its pid may now name an unrelated process. Every fd whose open file
// holds the lock shows it in its fdinfo ("lock:" lines), which a reader
// may read of its own processes, and root of all.
package queue

import (
	"bufio"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// lockFile is one of the queue's own locked files.
type lockFile struct {
	key      lockKey
	dev, ino uint64
	lock     lockSet
}

// maxLockOwners bounds the holders named for one lock (every process that
// shares the open file holds it).
const maxLockOwners = 8

// holding is what a look at a process's fds says of one lock.
type holding int

const (
	holdUnknown holding = iota // its fds cannot be read (another user's, or gone)
	holdNo
	holdYes
)

// holdsLock says whether pid holds f's flock through an fd of its own.
func holdsLock(pid int, f lockFile) holding {
	dir := "/proc/" + strconv.Itoa(pid)
	fdDir, err := unix.Open(dir+"/fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return holdNo // gone (or hidden by hidepid: then no walk sees it either)
	}
	if err != nil {
		return holdUnknown
	}
	d := os.NewFile(uintptr(fdDir), "fd")
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return holdUnknown
	}
	for _, n := range names {
		var stx unix.Statx_t
		if unix.Statx(fdDir, n, unix.AT_STATX_DONT_SYNC, unix.STATX_INO, &stx) != nil ||
			unix.Mkdev(stx.Dev_major, stx.Dev_minor) != f.dev || stx.Ino != f.ino {
			continue
		}
		if fdinfoLocks(dir+"/fdinfo/"+n, f.key) {
			return holdYes
		}
	}
	return holdNo
}

// fdinfoLocks reports whether the fdinfo file path has a flock on key.
func fdinfoLocks(path string, key lockKey) bool {
	fi, err := os.Open(path)
	if err != nil {
		return false
	}
	defer fi.Close()
	sc := bufio.NewScanner(fi)
	for sc.Scan() {
		// lock:	1: FLOCK  ADVISORY  WRITE 8229 fe:00:9978007 0 EOF
		rest, ok := strings.CutPrefix(sc.Text(), "lock:")
		fs := strings.Fields(rest)
		if ok && len(fs) >= 6 && fs[1] == "FLOCK" && lockKey(fs[5]) == key {
			return true
		}
	}
	return false
}

// fdHolders lists the processes that hold f's flock through an fd, as far
// as this reader may read their fds: a walk of /proc, done only when the
// taker /proc/locks names does not hold it.
func fdHolders(f lockFile) []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	var out []int
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil || pid == os.Getpid() {
			continue
		}
		if holdsLock(pid, f) == holdYes {
			if out = append(out, pid); len(out) == maxLockOwners {
				break
			}
		}
	}
	return out
}

// takers remembers, per lock and taker, the holders a walk found, so that
// a waiter held up by them walks /proc once, not at every look.
var takers = struct {
	sync.Mutex
	m map[string][]int
}{m: map[string][]int{}}

// owners is who holds f's lock where /proc/locks names taker: taker
// itself when its fds show it, or cannot be read; else the processes
// whose fds show it (none: this reader cannot see them).
func owners(taker int, f lockFile) (pids []int, moved bool) {
	if holdsLock(taker, f) != holdNo {
		return []int{taker}, false
	}
	k := string(f.key) + "@" + strconv.Itoa(taker)
	takers.Lock()
	cached := takers.m[k]
	takers.Unlock()
	still := len(cached) > 0
	for _, p := range cached {
		still = still && holdsLock(p, f) == holdYes
	}
	if still {
		return cached, true
	}
	found := fdHolders(f)
	takers.Lock()
	if len(takers.m) > 64 {
		clear(takers.m)
	}
	takers.m[k] = found
	takers.Unlock()
	return found, true
}

// unseenTaker marks, in lockOwners' takenBy, a taker that does not hold
// the lock, whose holders this reader cannot see.
const unseenTaker = -1

// lockOwners maps the takers /proc/locks names (pids, with their locks)
// to the processes that hold those locks now: by holder, its locks and
// the taker it stands for (0: itself). A taker whose fds cannot be read
// stays; one that holds no lock, and whose holders cannot be found, stays
// marked unseenTaker.
func (q *dirQueue) lockOwners(pids map[int]lockSet) (map[int]lockSet, map[int]int) {
	files := q.lockFiles()
	held, takenBy := map[int]lockSet{}, map[int]int{}
	for pid, set := range pids {
		for _, f := range files {
			if set&f.lock == 0 {
				continue
			}
			hs, moved := owners(pid, f)
			if len(hs) == 0 {
				// The taker's fds show no lock and no holder is in
				// sight: the taker is not named as if it held it.
				hs, takenBy[pid] = []int{pid}, unseenTaker
			}
			for _, o := range hs {
				held[o] |= f.lock
				if moved && o != pid {
					takenBy[o] = pid
				}
			}
		}
	}
	return held, takenBy
}
