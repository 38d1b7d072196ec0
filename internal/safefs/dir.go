// dir.go owns the checked directory fd: opening a directory whose last
// components are never followed, making a shared one with its mode and
// group set exactly, and the per-name operations relative to it.
package safefs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Dir is an open directory; names are looked up relative to its fd.
type Dir struct {
	fd   int
	path string
}

// OpenDir opens base as given (an admin's or the caller's own path, which
// may be a symlink they made), then each of names below it without
// following a symlink: OpenDir("/var/lib/gpu-hold", "gpu", "records").
func OpenDir(base string, names ...string) (*Dir, error) {
	fd, err := unix.Open(base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open directory", Path: base, Err: err}
	}
	d := &Dir{fd: fd, path: base}
	for _, n := range names {
		sub, err := d.Sub(n)
		d.Close()
		if err != nil {
			return nil, err
		}
		d = sub
	}
	return d, nil
}

// OpenDirNoFollow opens path's parent as given and path's last component
// without following it.
func OpenDirNoFollow(path string) (*Dir, error) {
	return OpenDir(filepath.Dir(path), filepath.Base(path))
}

// Sub opens the directory name below d, never through a symlink. A
// symlink or another file there is a *NotRegularError saying what it is.
func (d *Dir) Sub(name string) (*Dir, error) {
	path := d.Join(name)
	fd, err := unix.Openat(d.fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if st, lerr := d.Lstat(name); lerr == nil && !st.IsDir() {
			return nil, &NotRegularError{Info: st, Want: "a directory"}
		}
		return nil, &os.PathError{Op: "open directory", Path: path, Err: err}
	}
	return &Dir{fd: fd, path: path}, nil
}

// MkdirSub opens the directory name below d, making it when missing with
// mode set exactly (the umask would keep the group out; setgid and sticky
// are kept) and, when gid >= 0, group gid. created says this call made it.
func (d *Dir) MkdirSub(name string, mode uint32, gid int) (sub *Dir, created bool, err error) {
	err = unix.Mkdirat(d.fd, name, mode&0o777)
	switch {
	case err == nil:
		created = true
	case errors.Is(err, unix.EEXIST):
	default:
		return nil, false, &os.PathError{Op: "mkdir", Path: d.Join(name), Err: err}
	}
	if sub, err = d.Sub(name); err != nil || !created {
		return sub, created, err
	}
	if gid >= 0 {
		// Best effort: only a member of gid (or root) may give it away.
		unix.Fchown(sub.fd, -1, gid)
	}
	if err := unix.Fchmod(sub.fd, mode); err != nil {
		return sub, true, &os.PathError{Op: "chmod", Path: sub.path, Err: err}
	}
	return sub, true, nil
}

// Path is the directory's path as it was opened.
func (d *Dir) Path() string { return d.path }

// Join is the path of name in d, for messages.
func (d *Dir) Join(name string) string { return filepath.Join(d.path, name) }

// Fd is the directory's fd, for *at calls this package lacks.
func (d *Dir) Fd() int { return d.fd }

// Close closes the directory fd.
func (d *Dir) Close() error {
	if d == nil || d.fd < 0 {
		return nil
	}
	err := unix.Close(d.fd)
	d.fd = -1
	return err
}

// Stat is the directory's own Info.
func (d *Dir) Stat() (Info, error) {
	var st unix.Stat_t
	if err := unix.Fstat(d.fd, &st); err != nil {
		return Info{}, &os.PathError{Op: "fstat", Path: d.path, Err: err}
	}
	return infoOf(d.path, &st), nil
}

// Chmod sets the directory's mode exactly.
func (d *Dir) Chmod(mode uint32) error {
	if err := unix.Fchmod(d.fd, mode); err != nil {
		return &os.PathError{Op: "chmod", Path: d.path, Err: err}
	}
	return nil
}

// Chgrp sets the directory's group.
func (d *Dir) Chgrp(gid int) error {
	if err := unix.Fchown(d.fd, -1, gid); err != nil {
		return &os.PathError{Op: "chgrp", Path: d.path, Err: err}
	}
	return nil
}

// Lstat describes name without following it.
func (d *Dir) Lstat(name string) (Info, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return Info{}, &os.PathError{Op: "lstat", Path: d.Join(name), Err: err}
	}
	return infoOf(d.Join(name), &st), nil
}

// Names lists the directory's entries (not . and ..).
func (d *Dir) Names() ([]string, error) {
	fd, err := unix.Openat(d.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open directory", Path: d.path, Err: err}
	}
	f := os.NewFile(uintptr(fd), d.path)
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", d.path, err)
	}
	return names, nil
}

// Remove unlinks name when it still is the file was (dev, ino): a name
// replaced since it was checked is left alone. A missing name is success.
func (d *Dir) Remove(name string, was Info) error {
	st, err := d.Lstat(name)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	if !st.Same(was) {
		return nil
	}
	if err := unix.Unlinkat(d.fd, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return &os.PathError{Op: "remove", Path: d.Join(name), Err: err}
	}
	return nil
}

// Rename renames from to to in d; to is replaced (never followed).
func (d *Dir) Rename(from, to string) error {
	if err := unix.Renameat(d.fd, from, d.fd, to); err != nil {
		return &os.LinkError{Op: "rename", Old: d.Join(from), New: d.Join(to), Err: err}
	}
	return nil
}
