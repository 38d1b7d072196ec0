// liveness.go owns what makes a locked ticket live: its lock held for a
// live holder of the ticket's own user. Any user who can read a ticket can
// flock it, so the lock alone would let a stranger keep a dead holder's
// ticket "alive" (its lineage never reaped, its successor started beside
// it) or pass a forged ticket off as the hold of another user's process.
package queue

import (
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/proc"
)

// ownPidNS is this process's pid namespace (its inode), 0 when unknown.
var ownPidNS = sync.OnceValue(func() uint64 {
	var st unix.Stat_t
	if unix.Stat("/proc/self/ns/pid", &st) != nil {
		return 0
	}
	return st.Ino
})

// here reports whether e's holder pid is known to mean something in this
// process's pid namespace, so that its process can be asked about. A
// ticket of an earlier version (no PidNS) may be a container's.
func here(e *entry) bool { return e.PidNS != 0 && e.PidNS == ownPidNS() }

// holderLive reports whether e's holder (pid and start time) still runs;
// forged says why e cannot be believed when that process runs as another
// user than the ticket's. A process /proc hides from this reader (hidepid)
// cannot be told from its holder: it counts as alive, as its lock says.
func holderLive(e *entry) (alive bool, forged string) {
	// Its credentials, not /proc's owner: a non-dumpable hold's /proc is root's.
	uid, err := proc.EUIDOf(e.Holder)
	switch {
	case errors.Is(err, proc.ErrHidden):
		return true, ""
	case err != nil:
		return false, ""
	case uid != e.UID:
		return true, fmt.Sprintf("it names process %d (of uid %d) as its holder, not a process of its own uid %d (forged?)", e.Holder.PID, uid, e.UID)
	}
	return true, ""
}

// checkLock settles e.live for a ticket whose lock is held: false when its
// holder is gone, whoever holds the lock now (reported once). ok is false
// when the ticket is forged (why says how). A holder of another pid
// namespace cannot be asked about: its lock alone says it is alive.
func (q *dirQueue) checkLock(e *entry) (why string, ok bool) {
	if !here(e) {
		return "", true
	}
	alive, forged := holderLive(e)
	if forged != "" {
		return forged, false
	}
	if !alive {
		q.warnf(fmt.Sprintf("stranger-lock@%d", e.ino), "ticket %s/%s (uid %d) is locked, but its holder %v is gone: a process that is not its holder holds its lock; its holder counts as dead", q.path, e.name, e.UID, e.Holder)
		e.live = false
	}
	return "", true
}
