// dir.go owns the directory backend's handle: OpenDir, the check of the
// resource name, and the opening (or creation) of <dir>/<resource>/ through
// a directory fd that is checked once and used for every later file access.
package queue

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// DirOptions tune the directory backend.
type DirOptions struct {
	// Warn receives one line per problem file in the queue directory
	// (garbage, foreign, forged, a planted symlink), once per file per
	// process. Nil drops the warnings.
	Warn func(msg string)
}

// dirQueue is one resource's queue in <dir>/<resource>/. Every file in it is
// reached relative to fd, without following symlinks.
type dirQueue struct {
	path     string // <dir>/<resource>, for messages
	resource string
	fd       int // O_DIRECTORY|O_NOFOLLOW fd of path
	dev, ino uint64
	mode     uint32 // the directory's mode, to derive shared files' modes
	gid      uint32
	euid     int
	warn     func(string)

	seenMu sync.Mutex
	seen   map[string]entry // waiting tickets read before, for scanFor

	wakes atomic.Int64 // times a waiter of this handle woke from its poll
}

// resourceNameOK reports whether name is 1 to 64 of letters, digits, '.',
// '_' and '-', starting with a letter or digit (a loop, not a regexp, which
// every invocation would compile at start-up).
func resourceNameOK(name string) bool {
	if len(name) == 0 || len(name) > 64 {
		return false
	}
	for i, c := range []byte(name) {
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '_' && c != '-') {
			return false
		}
	}
	return true
}

// ValidResource checks a resource name: 1-64 letters, digits, '.', '_' or
// '-', starting with a letter or digit (so no slashes and no "." or "..").
func ValidResource(name string) error {
	if !resourceNameOK(name) {
		return fmt.Errorf("resource name %q is invalid: use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit (for example -r gpu or -r npu0)", name)
	}
	return nil
}

// OpenDir opens the queue of resource in dir, creating <dir>/<resource>/
// when missing (mode 0770 minus the umask, group-writable and sticky when
// dir is a shared group-writable directory; a setgid dir's group is
// inherited). The caller may close the queue with its Close method.
func OpenDir(dir, resource string, opts DirOptions) (Queue, error) {
	if err := ValidResource(resource); err != nil {
		return nil, err
	}
	// The base dir may be a symlink an admin made (/var/lib/gpu-hold ->
	// /data/...): it is trusted, but must not be writable by anyone without
	// the sticky bit.
	base, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("cannot open queue dir %s: %v; create it or point --dir/GPU_HOLD_DIR at a directory", dir, err)
	}
	defer unix.Close(base)
	var bst unix.Stat_t
	if err := unix.Fstat(base, &bst); err != nil {
		return nil, fmt.Errorf("cannot stat queue dir %s: %v", dir, err)
	}
	if bst.Mode&0o002 != 0 && bst.Mode&unix.S_ISVTX == 0 {
		return nil, fmt.Errorf("queue dir %s is world-writable without the sticky bit, so anyone could replace the queue: run chmod +t %s (or chmod o-w)", dir, dir)
	}
	path := filepath.Join(dir, resource)
	perm := resourcePerm(bst.Mode, umask())
	created := false
	switch err := unix.Mkdirat(base, resource, perm); {
	case err == nil:
		created = true
	case errors.Is(err, unix.EEXIST):
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM), errors.Is(err, unix.EROFS):
		return nil, fmt.Errorf("cannot create %s: queue dir %s is not writable by uid %d (%v): %s", path, dir, os.Geteuid(), err, joinHint(bst.Gid))
	default:
		return nil, fmt.Errorf("cannot create %s: %v", path, err)
	}
	fd, err := unix.Openat(base, resource, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		var st unix.Stat_t
		if unix.Fstatat(base, resource, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return nil, fmt.Errorf("%s is %s, not a directory; gpu-hold never follows it: remove it (rm %s) and retry", path, kind(st.Mode), path)
		}
		if errors.Is(err, unix.EACCES) {
			return nil, fmt.Errorf("cannot open %s: not readable by uid %d: %s", path, os.Geteuid(), joinHint(bst.Gid))
		}
		return nil, fmt.Errorf("cannot open %s: %v", path, err)
	}
	q := &dirQueue{path: path, resource: resource, fd: fd, euid: os.Geteuid(), warn: opts.Warn}
	if err := q.checkDir(created, perm, bst.Uid); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return q, nil
}

// checkDir checks (and, for a dir we own, fixes) the resource dir's mode:
// a dir others can write must be sticky, or they could remove each other's
// tickets and the token.
func (q *dirQueue) checkDir(created bool, perm, baseUID uint32) error {
	var st unix.Stat_t
	if err := unix.Fstat(q.fd, &st); err != nil {
		return fmt.Errorf("cannot stat %s: %v", q.path, err)
	}
	mine := int(st.Uid) == q.euid
	want := st.Mode & 0o7777
	if created && mine {
		want = perm | st.Mode&unix.S_ISGID // mkdir applied the umask; setgid is inherited
	}
	if want&0o022 != 0 {
		want |= unix.S_ISVTX
	}
	if want != st.Mode&0o7777 {
		if !mine {
			return fmt.Errorf("%s is writable by others without the sticky bit (mode %04o), so its users could remove each other's tickets: ask its owner (uid %d) or an admin to run chmod +t %s", q.path, st.Mode&0o7777, st.Uid, q.path)
		}
		if err := unix.Fchmod(q.fd, want); err != nil {
			return fmt.Errorf("cannot set mode %04o on %s: %v", want, q.path, err)
		}
		st.Mode = st.Mode&^0o7777 | want
	}
	q.dev, q.ino, q.mode, q.gid = st.Dev, st.Ino, st.Mode, st.Gid
	if st.Mode&0o022 != 0 && !mine && st.Uid != 0 && st.Uid != baseUID {
		// The sticky bit does not bind a directory's owner.
		q.warnf("owner", "%s belongs to uid %d, who can remove anyone's tickets in it: ask an admin to chown it to root (or the owner of the queue dir)", q.path, st.Uid)
	}
	return nil
}

// resourcePerm is the mode of a new resource dir: 0770 minus the umask,
// with the group's rwx kept when the base dir is group-writable (a fleet
// dir shared through its group), and sticky whenever others may write.
func resourcePerm(baseMode, umask uint32) uint32 {
	perm := 0o770&^umask | 0o700
	if baseMode&0o070 == 0o070 {
		perm |= 0o070
	}
	if perm&0o022 != 0 {
		perm |= unix.S_ISVTX
	}
	return perm
}

// umask reads the process umask without changing it (Umask: in
// /proc/self/status); 022 when it cannot be read.
func umask() uint32 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0o022
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Umask:"); ok {
			if m, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32); err == nil {
				return uint32(m)
			}
		}
	}
	return 0o022
}

// joinHint tells a user without access what to do.
func joinHint(gid uint32) string {
	name := strconv.Itoa(int(gid))
	if g, err := user.LookupGroupId(name); err == nil {
		name = g.Name
	}
	return "ask an admin to add you to group " + name + ", or set GPU_HOLD_DIR to a directory of your own"
}

// sharedMode is the mode of a file every user of the dir must write (the
// ticket counter): group- or world-writable as the dir is.
func (q *dirQueue) sharedMode() uint32 {
	m := uint32(0o644)
	if q.mode&0o020 != 0 {
		m |= 0o020
	}
	if q.mode&0o002 != 0 {
		m |= 0o002
	}
	return m
}

// Close closes the queue's directory fd. Waiters and grants obtained from it
// must be finished first.
func (q *dirQueue) Close() error { return unix.Close(q.fd) }

// Path is the resource directory, <dir>/<resource>.
func (q *dirQueue) Path() string { return q.path }

// warnf reports a problem file once per process; key names the file
// (name and inode).
func (q *dirQueue) warnf(key string, format string, a ...any) {
	k := fmt.Sprintf("%d:%d/%s", q.dev, q.ino, key)
	warnedMu.Lock()
	dup := warned[k]
	warned[k] = true
	warnedMu.Unlock()
	if !dup && q.warn != nil {
		q.warn(fmt.Sprintf(format, a...))
	}
}
