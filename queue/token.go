// token.go owns the token: an exclusive flock on <dir>/<resource>/token,
// held through the holder's open fd, so the kernel drops it when the holder
// dies in any way. A lock taken on a token file that was unlinked or
// replaced meanwhile is noticed (st_dev/st_ino of the fd against the path)
// and retried. The file's content is never read.
package queue

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// tokenLock is an open fd of the token file.
type tokenLock struct {
	fd       int
	dev, ino uint64
	held     bool
	// guard is the holder's own fd of the resource directory, flocked
	// while it holds the token: a payload that removes both its ticket and
	// the token file cannot make a waiter a second holder, since nobody
	// can remove the directory's lock from under the holder.
	guard int
	// dirBusy: the last tryLock got the token's lock but not the
	// directory's, which another process holds.
	dirBusy bool
}

func (q *dirQueue) openToken() (*tokenLock, error) {
	// Read-only is enough for flock, so nobody needs to write the token.
	fd, st, err := q.openShared(tokenName, unix.O_RDONLY, 0o644)
	if err != nil {
		return nil, err
	}
	if st.Size != 0 {
		q.warnf(fmt.Sprintf("tokensize@%d", st.Ino), "%s/%s (uid %d) should be empty but holds %d bytes: it is used only as a lock and its content is ignored", q.path, tokenName, st.Uid, st.Size)
	}
	return &tokenLock{fd: fd, dev: st.Dev, ino: st.Ino}, nil
}

// tryLock takes the token when it is free, without blocking. When the
// token file was replaced since tl was opened, tl is reopened on the new
// file and the caller is told it did not get the token (it rescans and
// tries again).
func (q *dirQueue) tryLock(tl *tokenLock) (bool, error) {
	if tl.held {
		return true, nil
	}
	tl.dirBusy = false
	err := unix.Flock(tl.fd, unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		if !q.same(tokenName, tl.dev, tl.ino) {
			return false, q.reopenToken(tl)
		}
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("cannot lock %s/%s: %v (the queue needs flock(2) on this filesystem)", q.path, tokenName, err)
	}
	// A lock on a file that is no longer the token is no token.
	if !q.same(tokenName, tl.dev, tl.ino) {
		unix.Flock(tl.fd, unix.LOCK_UN)
		return false, q.reopenToken(tl)
	}
	tl.dirBusy = !q.lockGuard(tl)
	if tl.dirBusy {
		// Someone holds the directory's lock without the token's: a
		// holder whose token file was replaced, or a process that took
		// the directory's lock itself. The caller tells which (lockers).
		unix.Flock(tl.fd, unix.LOCK_UN)
		return false, nil
	}
	tl.held = true
	return true, nil
}

// lockGuard takes the directory's lock on an fd of tl's own (one per
// holder, as for the token); false when another holder has it.
func (q *dirQueue) lockGuard(tl *tokenLock) bool {
	fd, err := unix.Openat(q.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return true // no worse than before the guard: the token decides
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		unix.Close(fd)
		return !errors.Is(err, unix.EWOULDBLOCK)
	}
	tl.guard = fd
	return true
}

func (q *dirQueue) reopenToken(tl *tokenLock) error {
	q.warnf(fmt.Sprintf("token@%d", tl.ino), "%s/%s was replaced while in use (someone removed it): reopening it", q.path, tokenName)
	unix.Close(tl.fd)
	n, err := q.openToken()
	if err != nil {
		tl.fd = -1
		return err
	}
	*tl = *n
	return nil
}

// release unlocks (explicitly, so the lock is free before the close event
// that wakes the waiters) and closes. The directory's lock goes first: a
// waiter that got the token's lock in between would find the directory
// still held, and take a holder leaving for one whose token was replaced.
func (tl *tokenLock) close() {
	if tl == nil || tl.fd < 0 {
		return
	}
	if tl.guard > 0 {
		unix.Close(tl.guard) // drops the directory's lock
		tl.guard = 0
	}
	if tl.held {
		unix.Flock(tl.fd, unix.LOCK_UN)
		tl.held = false
	}
	unix.Close(tl.fd)
	tl.fd = -1
}

// tokenLocked reports whether a process holds the token's lock, by taking
// a shared lock of our own on it for an instant. (/proc/locks would say
// who, but a read of it after a quiet moment sleeps for an RCU grace
// period: milliseconds, in a pool round.) A waiter whose take fails in
// that instant is woken by the close that ends it.
func (q *dirQueue) tokenLocked() bool {
	tl, err := q.openToken()
	if err != nil {
		return false
	}
	defer tl.close()
	locked, err := lockedByOther(tl.fd)
	return locked && err == nil
}
