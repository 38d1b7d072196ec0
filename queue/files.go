// files.go owns every file access in the queue directory: opening an
// existing file without following a symlink or opening a special file,
// creating with O_EXCL|O_NOFOLLOW, publishing a locked file under its name
// atomically, and removing a file only when it is still the one we checked.
package queue

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/safefs"
)

const (
	tokenName  = "token"
	seqName    = "seq"
	tmpPrefix  = ".tmp."
	maxFileLen = 64 << 10
)

var (
	warnedMu sync.Mutex
	warned   = map[string]bool{}
)

// notRegular is returned for a name that is not a regular file.
type notRegular struct {
	path string
	mode uint32
}

func (e *notRegular) Error() string {
	return fmt.Sprintf("%s is %s, not a regular file; gpu-hold never follows or opens it: remove it (rm %s)", e.path, safefs.Kind(e.mode), e.path)
}

// errChanged: the name was replaced between the check and the open.
var errChanged = errors.New("file was replaced while being opened")

// openRegular opens an existing regular file name in the queue dir. It
// lstat()s first so a FIFO or device is never opened, opens with
// O_NOFOLLOW|O_NONBLOCK, and checks the fd is the file it lstat()ed.
func (q *dirQueue) openRegular(name string, flags int) (int, unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(q.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return -1, st, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return -1, st, &notRegular{q.path + "/" + name, st.Mode}
	}
	fd, err := unix.Openat(q.fd, name, flags|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, st, err
	}
	var fst unix.Stat_t
	if err := unix.Fstat(fd, &fst); err != nil || fst.Dev != st.Dev || fst.Ino != st.Ino || fst.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return -1, st, errChanged
	}
	return fd, fst, nil
}

// createExcl creates name (O_CREAT|O_EXCL|O_NOFOLLOW) and sets its mode
// exactly (the umask would otherwise hide tickets from the dir's group).
func (q *dirQueue) createExcl(name string, mode uint32) (int, error) {
	fd, err := unix.Openat(q.fd, name, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_NOCTTY|unix.O_CLOEXEC, mode)
	if err != nil {
		return -1, err
	}
	unix.Fchmod(fd, mode)
	return fd, nil
}

// openShared opens a file every queue user shares (the token, the counter),
// creating it when missing. A symlink or special file planted there is
// removed when we may (unlink never follows it) and reported; otherwise the
// error says what to do.
func (q *dirQueue) openShared(name string, flags int, mode uint32) (int, unix.Stat_t, error) {
	path := q.path + "/" + name
	for try := 0; try < 5; try++ {
		fd, st, err := q.openRegular(name, flags)
		var nr *notRegular
		switch {
		case err == nil:
			return fd, st, nil
		case errors.Is(err, unix.ENOENT):
			fd, err := q.createExcl(name, mode)
			if errors.Is(err, unix.EEXIST) {
				continue
			}
			if err != nil {
				return -1, st, q.accessErr("create", path, err)
			}
			if flags&(unix.O_WRONLY|unix.O_RDWR) == 0 {
				// Reopen read-only so every user's fd is alike.
				unix.Close(fd)
				continue
			}
			unix.Fstat(fd, &st)
			return fd, st, nil
		case errors.As(err, &nr) && st.Mode&unix.S_IFMT != unix.S_IFDIR:
			// A symlink, FIFO, socket or device here (planted?) was never
			// opened by any gpu-hold, so nobody holds it: removing it (which
			// never follows a symlink) is safe.
			k := safefs.Kind(st.Mode)
			q.warnf(fmt.Sprintf("%s@%d", name, st.Ino), "%s is %s of uid %d (planted?); gpu-hold never follows or opens it; removing it", path, k, st.Uid)
			if uerr := unix.Unlinkat(q.fd, name, 0); uerr != nil && !errors.Is(uerr, unix.ENOENT) {
				return -1, st, fmt.Errorf("%s is %s of uid %d (planted?); gpu-hold never follows or opens it and cannot remove it (%v): ask its owner or an admin to rm %s", path, k, st.Uid, uerr, path)
			}
		case errors.Is(err, errChanged):
			continue
		case errors.As(err, &nr):
			return -1, st, fmt.Errorf("%v (it belongs to uid %d)", err, st.Uid)
		default:
			return -1, st, q.accessErr("open", path, err)
		}
	}
	return -1, unix.Stat_t{}, fmt.Errorf("%s keeps changing while gpu-hold opens it: someone is replacing it; ask an admin to check %s", path, q.path)
}

// accessErr turns EACCES/EPERM into a message that says what to do.
func (q *dirQueue) accessErr(op, path string, err error) error {
	if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.EROFS) {
		return fmt.Errorf("cannot %s %s as uid %d (%w): %s", op, path, q.euid, err, joinHint(q.gid))
	}
	return fmt.Errorf("cannot %s %s: %w", op, path, err)
}

// publish writes b into a fresh file, locks it (LOCK_EX, kept by the
// returned fd) and gives it name atomically, so nobody ever sees a
// half-written or unlocked file under name. noReplace fails with EEXIST
// when name exists; otherwise name is replaced (our own ticket only).
func (q *dirQueue) publish(name string, b []byte, noReplace bool) (int, unix.Stat_t, error) {
	var st unix.Stat_t
	var rnd [6]byte
	rand.Read(rnd[:])
	tmp := fmt.Sprintf("%s%d.%s", tmpPrefix, os.Getpid(), hex.EncodeToString(rnd[:]))
	// Made unreadable to others until it is locked: anyone who can open
	// it could take a shared lock first and make ours fail.
	fd, err := q.createExcl(tmp, 0o600)
	if err != nil {
		return -1, st, q.accessErr("create a file in", q.path, err)
	}
	fail := func(err error) (int, unix.Stat_t, error) {
		unix.Unlinkat(q.fd, tmp, 0)
		unix.Close(fd)
		return -1, st, err
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return fail(fmt.Errorf("cannot lock %s/%s: %v (the queue needs flock(2) on this filesystem)", q.path, tmp, err))
	}
	if err := unix.Fchmod(fd, 0o644); err != nil {
		return fail(fmt.Errorf("cannot make %s/%s readable: %v", q.path, tmp, err))
	}
	if err := writeAll(fd, b); err != nil {
		return fail(fmt.Errorf("cannot write %s/%s: %v", q.path, tmp, err))
	}
	if noReplace {
		err = unix.Renameat2(q.fd, tmp, q.fd, name, unix.RENAME_NOREPLACE)
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
			// The filesystem lacks RENAME_NOREPLACE: link(2) never replaces.
			if err = unix.Linkat(q.fd, tmp, q.fd, name, 0); err == nil {
				unix.Unlinkat(q.fd, tmp, 0)
			}
		}
	} else {
		err = unix.Renameat(q.fd, tmp, q.fd, name)
	}
	if err != nil {
		if errors.Is(err, unix.EEXIST) {
			return fail(unix.EEXIST)
		}
		return fail(fmt.Errorf("cannot rename %s/%s to %s: %v", q.path, tmp, name, err))
	}
	unix.Fstat(fd, &st)
	return fd, st, nil
}

func writeAll(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return err
		}
		b = b[n:]
	}
	return nil
}

// readAll reads a whole (small) file from fd; files over maxFileLen are an error.
func readAll(fd int) ([]byte, error) {
	buf := make([]byte, 4096)
	var out []byte
	var off int64
	for {
		n, err := unix.Pread(fd, buf, off)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return nil, err
		}
		if n == 0 {
			return out, nil
		}
		out = append(out, buf[:n]...)
		off += int64(n)
		if len(out) > maxFileLen {
			return nil, fmt.Errorf("larger than %d bytes", maxFileLen)
		}
	}
}

// same reports whether name still is the file (dev, ino).
func (q *dirQueue) same(name string, dev, ino uint64) bool {
	var st unix.Stat_t
	return unix.Fstatat(q.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Dev == dev && st.Ino == ino
}

// removeIfSame unlinks name when it still is (dev, ino). ENOENT is success.
func (q *dirQueue) removeIfSame(name string, dev, ino uint64) error {
	var st unix.Stat_t
	if err := unix.Fstatat(q.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return err
	}
	if st.Dev != dev || st.Ino != ino {
		return nil // already gone and replaced
	}
	if err := unix.Unlinkat(q.fd, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return err
	}
	return nil
}

// lockedByOther probes whether fd's file is locked (LOCK_EX) by its owner:
// a free lock means the process that created the file is gone.
func lockedByOther(fd int) (bool, error) {
	err := unix.Flock(fd, unix.LOCK_SH|unix.LOCK_NB)
	if err == nil {
		unix.Flock(fd, unix.LOCK_UN)
		return false, nil
	}
	if errors.Is(err, unix.EWOULDBLOCK) {
		return true, nil
	}
	return true, err
}
