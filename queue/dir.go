// dir.go owns the directory backend's handle: OpenDir, the check of the
// resource name, and the opening (or creation, with its group and mode) of
// <dir>/<resource>/ through a directory fd that is checked once, owner
// included, and used for every later file access.
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
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/safefs"
)

// DirOptions tune the directory backend.
type DirOptions struct {
	// Warn receives one line per problem file in the queue directory
	// (garbage, foreign, forged, a planted symlink), once per file per
	// process. Nil drops the warnings.
	Warn func(msg string)
	// NoCreate is for commands that only read (queue, cancel, show): they
	// create nothing, so a mistyped -r leaves no directory behind. A
	// missing queue or resource dir is then an error that wraps
	// ErrNoResource, and a resource dir another user owns is reported
	// through Warn instead of refused.
	NoCreate bool
}

// ErrNoResource: the resource has no directory in the queue dir (no hold
// has used it there), and the open was not allowed to create one.
var ErrNoResource = errors.New("resource has no directory in the queue dir")

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
// when missing unless opts.NoCreate: in a shared dir (others may write it)
// with mode 03775 and the dir's group, set explicitly so that no umask
// locks the group out; in a private dir with 0770 minus the umask. A
// resource dir in a shared dir that another non-root user owns is refused.
// The caller may close the queue with its Close method.
func OpenDir(dir, resource string, opts DirOptions) (Queue, error) {
	if err := ValidResource(resource); err != nil {
		return nil, err
	}
	base, bst, err := openBase(dir, opts.NoCreate)
	if err != nil {
		return nil, err
	}
	defer unix.Close(base)
	path := filepath.Join(dir, resource)
	created := false
	if !opts.NoCreate {
		if created, err = mkResourceDir(base, bst, path); err != nil {
			return nil, err
		}
	}
	fd, err := openResourceDir(base, bst, path, opts.NoCreate)
	if err != nil {
		return nil, err
	}
	q := &dirQueue{path: path, resource: resource, fd: fd, euid: os.Geteuid(), warn: opts.Warn}
	if created && sharedBase(bst.Mode) {
		err = q.share(bst)
	}
	if err == nil {
		err = q.checkDir(bst, opts.NoCreate)
	}
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return q, nil
}

// openBase opens and checks the queue dir. It may be a symlink an admin
// made (/var/lib/gpu-hold -> /data/...): it is trusted, but must not be
// writable by anyone without the sticky bit.
func openBase(dir string, noCreate bool) (int, unix.Stat_t, error) {
	var bst unix.Stat_t
	base, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		if noCreate && errors.Is(err, unix.ENOENT) {
			return -1, bst, fmt.Errorf("%w: queue dir %s does not exist", ErrNoResource, dir)
		}
		return -1, bst, fmt.Errorf("cannot open queue dir %s: %v; create it or point --dir/GPU_HOLD_DIR at a directory", dir, err)
	}
	if err := unix.Fstat(base, &bst); err != nil {
		unix.Close(base)
		return -1, bst, fmt.Errorf("cannot stat queue dir %s: %v", dir, err)
	}
	if bst.Mode&0o002 != 0 && bst.Mode&unix.S_ISVTX == 0 {
		unix.Close(base)
		return -1, bst, fmt.Errorf("queue dir %s is world-writable without the sticky bit, so anyone could replace the queue: run chmod +t %s (or chmod o-w)", dir, dir)
	}
	return base, bst, nil
}

// mkResourceDir creates the resource dir path in the queue dir base when
// missing, and reports whether it did. In a shared dir it starts 0700, so
// nobody can use it before share has given it its group and mode, and only
// root or the queue dir's owner makes it (see unmade).
func mkResourceDir(base int, bst unix.Stat_t, path string) (bool, error) {
	perm := resourcePerm(umask())
	if sharedBase(bst.Mode) {
		perm = 0o700
		if e := os.Geteuid(); e != 0 && uint32(e) != bst.Uid {
			return false, unmade(base, bst, path)
		}
	}
	switch err := unix.Mkdirat(base, filepath.Base(path), perm); {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.EEXIST):
		return false, nil
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM), errors.Is(err, unix.EROFS):
		return false, fmt.Errorf("cannot create %s: queue dir %s is not writable by uid %d (%v): %s", path, filepath.Dir(path), os.Geteuid(), err, joinHint(bst.Gid))
	default:
		return false, fmt.Errorf("cannot create %s: %v", path, err)
	}
}

// unmade refuses, when resource dir path is missing, to make it as a user
// of a shared queue dir: it would be that user's, who could remove or
// forge every ticket in it, so every other user's hold (root's too) would
// refuse it, and the resource would stay wedged until an admin removed it.
func unmade(base int, bst unix.Stat_t, path string) error {
	var st unix.Stat_t
	if err := unix.Fstatat(base, filepath.Base(path), &st, unix.AT_SYMLINK_NOFOLLOW); !errors.Is(err, unix.ENOENT) {
		return nil // there: opening it says what it is
	}
	group := GroupName(bst.Gid)
	if bst.Gid == 0 {
		group = "GROUP"
	}
	return fmt.Errorf("resource dir %s does not exist, and only root or the owner (uid %d) of shared queue dir %s makes one (one uid %d made would be that user's alone, and every other hold would refuse it): ask an admin to run install -d -m 3775 -o root -g %s %s %s, or to declare the resource in %s (the root timer, gpu-hold reap --all, then makes it within seconds)",
		path, bst.Uid, filepath.Dir(path), os.Geteuid(), group, path, filepath.Join(path, "records"), filepath.Join(filepath.Dir(path), "resources.json"))
}

// openResourceDir opens the resource dir path (never through a symlink).
func openResourceDir(base int, bst unix.Stat_t, path string, noCreate bool) (int, error) {
	name := filepath.Base(path)
	for try := 0; ; try++ {
		fd, err := unix.Openat(base, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == nil {
			return fd, nil
		}
		var st unix.Stat_t
		statErr := unix.Fstatat(base, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		switch {
		case noCreate && errors.Is(err, unix.ENOENT):
			return -1, fmt.Errorf("%w: %s does not exist", ErrNoResource, path)
		case statErr == nil && st.Mode&unix.S_IFMT != unix.S_IFDIR:
			return -1, fmt.Errorf("%s is %s, not a directory; gpu-hold never follows it: remove it (rm %s) and retry", path, safefs.Kind(st.Mode), path)
		case errors.Is(err, unix.EACCES) && statErr == nil && sharedBase(bst.Mode) && st.Mode&0o7777 == 0o700 && try < 100:
			// Another hold has just made it and is giving it its group and
			// mode (mkResourceDir, share): a moment's wait.
			time.Sleep(5 * time.Millisecond)
			continue
		case errors.Is(err, unix.EACCES) && statErr == nil && st.Mode&0o050 != 0o050:
			return -1, fmt.Errorf("cannot open %s: not readable by uid %d, nor by its group (mode %04o): ask an admin to run chmod 3775 %s", path, os.Geteuid(), st.Mode&0o7777, path)
		case errors.Is(err, unix.EACCES):
			gid := bst.Gid
			if statErr == nil {
				gid = st.Gid
			}
			return -1, fmt.Errorf("cannot open %s: not readable by uid %d: %s", path, os.Geteuid(), joinHint(gid))
		}
		return -1, fmt.Errorf("cannot open %s: %v", path, err)
	}
}

// share gives a resource dir just created in a shared queue dir that dir's
// group (setgid did, unless the queue dir is not setgid) and its mode.
func (q *dirQueue) share(bst unix.Stat_t) error {
	var st unix.Stat_t
	if err := unix.Fstat(q.fd, &st); err != nil {
		return fmt.Errorf("cannot stat %s: %v", q.path, err)
	}
	if st.Gid != bst.Gid {
		if err := unix.Fchown(q.fd, -1, int(bst.Gid)); err != nil {
			q.warnf("group", "created %s with group %s, not the queue dir's %s (%v), so the queue dir's other members cannot use it: ask an admin to run chgrp %s %s",
				q.path, GroupName(st.Gid), GroupName(bst.Gid), err, GroupName(bst.Gid), q.path)
		}
	}
	mode := sharedDirMode(bst.Mode)
	if err := unix.Fchmod(q.fd, mode); err != nil {
		return fmt.Errorf("cannot set mode %04o on %s, which gpu-hold just created: %v", mode, q.path, err)
	}
	return nil
}

// checkDir checks (and, for a dir we own, fixes) the resource dir's mode,
// since a dir others can write must be sticky or they could remove each
// other's tickets and the token; then checks its owner.
func (q *dirQueue) checkDir(bst unix.Stat_t, noCreate bool) error {
	var st unix.Stat_t
	if err := unix.Fstat(q.fd, &st); err != nil {
		return fmt.Errorf("cannot stat %s: %v", q.path, err)
	}
	if st.Mode&0o022 != 0 && st.Mode&unix.S_ISVTX == 0 {
		if int(st.Uid) != q.euid {
			return fmt.Errorf("%s is writable by others without the sticky bit (mode %04o), so its users could remove each other's tickets: ask its owner (uid %d) or an admin to run chmod +t %s", q.path, st.Mode&0o7777, st.Uid, q.path)
		}
		want := st.Mode&0o7777 | unix.S_ISVTX
		if err := unix.Fchmod(q.fd, want); err != nil {
			return fmt.Errorf("cannot set mode %04o on %s: %v", want, q.path, err)
		}
		st.Mode = st.Mode&^0o7777 | want
	}
	q.dev, q.ino, q.mode, q.gid = st.Dev, st.Ino, st.Mode, st.Gid
	return q.checkOwner(st, bst, noCreate)
}

// checkOwner refuses a resource dir in a shared queue dir that another
// non-root user owns: the sticky bit does not bind a directory's owner, who
// could remove or forge every ticket, marker and record in it. Root, the
// caller, and the queue dir's owner (who could replace the whole queue dir
// anyway) are trusted. A read-only open only warns.
func (q *dirQueue) checkOwner(st, bst unix.Stat_t, noCreate bool) error {
	if !sharedBase(bst.Mode) || st.Uid == 0 || int(st.Uid) == q.euid || st.Uid == bst.Uid {
		return nil
	}
	msg := fmt.Sprintf("%s belongs to uid %d (%s), who could remove or forge every ticket and record in it", q.path, st.Uid, userName(st.Uid))
	fix := fmt.Sprintf("ask an admin to run chown root:%s %s; chmod 3775 %s (or to remove it: rm -r %s)", GroupName(bst.Gid), q.path, q.path, q.path)
	if noCreate {
		q.warnf("owner", "%s: %s", msg, fix)
		return nil
	}
	return fmt.Errorf("%s, so gpu-hold will not queue in it: %s", msg, fix)
}

// sharedBase reports whether others may write a queue dir of this mode:
// its resource dirs are then shared through the dir's group.
func sharedBase(mode uint32) bool { return mode&0o022 != 0 }

// sharedDirMode is the mode of a resource dir created in a shared queue
// dir: setgid (what is created in it keeps the group), sticky (nobody
// removes another's files), group-writable, readable by all (gpu-hold
// queue), and world-writable only when the queue dir is.
func sharedDirMode(baseMode uint32) uint32 { return 0o3775 | baseMode&0o002 }

// resourcePerm is the mode of a new resource dir in a private queue dir:
// 0770 minus the umask, sticky should the umask let others write.
func resourcePerm(umask uint32) uint32 {
	perm := 0o770&^umask | 0o700
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

// joinHint tells a user without access to a dir of group gid what to do.
func joinHint(gid uint32) string {
	return "ask an admin to add you to group " + GroupName(gid) + " (then log in again), or set GPU_HOLD_DIR to a directory of your own"
}

// GroupName names gid from the group database (only /etc/group in the
// static build), else prints the number.
func GroupName(gid uint32) string {
	n := strconv.FormatUint(uint64(gid), 10)
	if g, err := user.LookupGroupId(n); err == nil {
		return g.Name
	}
	return n
}

// userName names uid from the user database, else prints the number.
func userName(uid uint32) string {
	n := strconv.FormatUint(uint64(uid), 10)
	if u, err := user.LookupId(n); err == nil {
		return u.Username
	}
	return n
}

// ListResources names the resource dirs in queue dir dir, sorted: real
// directories (never a symlink) with valid resource names. A missing queue
// dir has none.
func ListResources(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot list queue dir %s: %v", dir, err)
	}
	var names []string
	for _, e := range ents {
		if e.IsDir() && resourceNameOK(e.Name()) {
			names = append(names, e.Name())
		}
	}
	return names, nil
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
