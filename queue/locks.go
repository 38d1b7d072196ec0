// locks.go owns reading the kernel's table of locks (/proc/locks) for the
// queue's own files: which processes hold the token's flock, the
// resource directory's and the ticket counter's. A read of the
// table after a quiet moment sleeps for an RCU grace period, so it is read
// only when a caller must know who holds a lock.
package queue

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// lockSet says which of the queue's own locks a process holds.
type lockSet uint8

const (
	lockToken lockSet = 1 << iota // the token file's flock
	lockDir                       // the resource directory's (a holder's guard)
	lockSeq                       // the ticket counter's, held by each enqueue for an instant

	// holderLocks are the locks a holder holds: the counter's is no sign
	// of one.
	holderLocks = lockToken | lockDir
)

// String names the locks for messages.
func (s lockSet) String() string {
	switch s {
	case lockToken:
		return "token"
	case lockDir:
		return "directory"
	case lockToken | lockDir:
		return "token and directory"
	case lockSeq:
		return "ticket counter"
	}
	if s&lockSeq != 0 {
		return (s &^ lockSeq).String() + " and ticket counter"
	}
	return "none"
}

// lockHolders returns the processes that hold the token's flock, the
// directory's or the counter's, with which; nil when /proc/locks cannot be read. The pid
// is the lock's taker, as /proc/locks names it (lock_owner.go says who
// holds it now).
func (q *dirQueue) lockHolders() map[int]lockSet {
	files := q.lockFiles()
	pids := map[int]lockSet{}
	if !eachLock(func(key lockKey, pid int) bool {
		for _, f := range files {
			if key == f.key {
				pids[pid] |= f.lock
			}
		}
		return true
	}) {
		return nil // unknown, not "nobody"
	}
	return pids
}

// lockFiles are the token's and the directory's files, as locks know them.
func (q *dirQueue) lockFiles() []lockFile {
	var files []lockFile
	var st unix.Stat_t
	if unix.Fstatat(q.fd, tokenName, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
		files = append(files, lockFile{keyOf(st.Dev, st.Ino), st.Dev, st.Ino, lockToken})
	}
	if unix.Fstat(q.fd, &st) == nil {
		files = append(files, lockFile{keyOf(st.Dev, st.Ino), st.Dev, st.Ino, lockDir})
	}
	if unix.Fstatat(q.fd, seqName, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
		files = append(files, lockFile{keyOf(st.Dev, st.Ino), st.Dev, st.Ino, lockSeq})
	}
	return files
}

// lockKey names a file as /proc/locks does: major:minor:inode.
type lockKey string

func keyOf(dev, ino uint64) lockKey {
	return lockKey(fmt.Sprintf("%02x:%02x:%d", unix.Major(dev), unix.Minor(dev), ino))
}

// lockTable is the kernel's table of locks; tests replace it.
var lockTable = "/proc/locks"

// eachLock calls fn with every flock held (not requested) in /proc/locks
// until fn returns false; false when the table cannot be read. The pid is
// the process that took the lock, as the reader's pid namespace sees it; a
// lock taken in a namespace this reader cannot see has none, and is left
// out.
func eachLock(fn func(key lockKey, pid int) bool) bool {
	f, err := os.Open(lockTable)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// 1: FLOCK  ADVISORY  WRITE 8229 fe:00:9978007 0 EOF
		// Blocked requests ("1: -> FLOCK ...") are not holders.
		fs := strings.Fields(sc.Text())
		if len(fs) < 6 || fs[1] != "FLOCK" {
			continue
		}
		if pid, err := strconv.Atoi(fs[4]); err == nil && pid > 0 && !fn(lockKey(fs[5]), pid) {
			return true
		}
	}
	return sc.Err() == nil
}
