// path.go owns opening a directory by a path a user gave (--dump, -o): each
// component is opened without following it, and a symlink on the way is
// followed only when it is root's or the caller's own, never one another
// user planted (in /tmp, in a shared directory).
package safefs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// OpenUserDir opens the directory path (made relative to the working
// directory, and cleaned, first). A missing component is made with mode
// mkdirMode (set exactly) when mkdirMode is not 0, else it is an error.
func OpenUserDir(path string, mkdirMode uint32) (*Dir, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("cannot resolve %s: %w", path, err)
	}
	cur, err := OpenDir("/")
	if err != nil {
		return nil, err
	}
	for _, name := range strings.Split(abs, "/") {
		if name == "" {
			continue
		}
		next, err := cur.userSub(name, mkdirMode)
		cur.Close()
		if err != nil {
			return nil, err
		}
		cur = next
	}
	cur.path = abs
	return cur, nil
}

// userSub opens one component for OpenUserDir.
func (d *Dir) userSub(name string, mkdirMode uint32) (*Dir, error) {
	sub, err := d.Sub(name)
	if errors.Is(err, unix.ENOENT) && mkdirMode != 0 {
		sub, _, err = d.MkdirSub(name, mkdirMode, -1)
	}
	var nr *NotRegularError
	if err == nil || !errors.As(err, &nr) || nr.Info.Mode&unix.S_IFMT != unix.S_IFLNK {
		return sub, err
	}
	return d.followLink(name, nr.Info)
}

// followLink opens the directory the symlink name (lstat'ed as link)
// points at, when root or the caller owns the link. The link must still be
// the same one afterwards: a symlink's target never changes in place.
func (d *Dir) followLink(name string, link Info) (*Dir, error) {
	if euid := os.Geteuid(); link.UID != 0 && int(link.UID) != euid {
		return nil, fmt.Errorf("%s is a symlink owned by uid %d, not by root or this process's uid %d: never followed (it may have been planted); remove it or name the real directory",
			link.Path, link.UID, euid)
	}
	fd, err := unix.Openat(d.fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open directory", Path: link.Path, Err: err}
	}
	if again, err := d.Lstat(name); err != nil || !again.Same(link) {
		unix.Close(fd)
		return nil, fmt.Errorf("%s: %w", link.Path, ErrChanged)
	}
	return &Dir{fd: fd, path: link.Path}, nil
}
