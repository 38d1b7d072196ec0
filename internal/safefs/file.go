// file.go owns opening, creating and reading one file in a Dir: lstat
// first so a FIFO or device is never opened, O_NOFOLLOW|O_NONBLOCK, and a
// check that the fd is the file that was lstat'ed.
package safefs

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// Open opens the existing regular file name with flags (O_RDONLY, O_RDWR,
// O_APPEND...; O_CREAT is not allowed: see Create, OpenOrCreate). A
// symlink, FIFO, device, socket or directory there is a *NotRegularError;
// opened for writing, a file with other hard links is a *LinkedError.
func (d *Dir) Open(name string, flags int) (*os.File, Info, error) {
	if flags&unix.O_CREAT != 0 {
		return nil, Info{}, fmt.Errorf("safefs: Open of %s with O_CREAT (a bug): use Create or OpenOrCreate", d.Join(name))
	}
	st, err := d.Lstat(name)
	if err != nil {
		return nil, st, err
	}
	if !st.IsRegular() {
		return nil, st, &NotRegularError{Info: st, Want: "a regular file"}
	}
	// O_TRUNC would truncate before the checks: it is done after them.
	fd, err := unix.Openat(d.fd, name, flags&^unix.O_TRUNC|fileFlags, 0)
	if err != nil {
		return nil, st, &os.PathError{Op: "open", Path: st.Path, Err: err}
	}
	fst, err := fdInfo(fd, st.Path)
	switch {
	case err != nil:
	case !fst.Same(st) || !fst.IsRegular():
		err = fmt.Errorf("%s: %w", st.Path, ErrChanged)
	case isWrite(flags) && fst.Nlink != 1:
		err = &LinkedError{Info: fst}
	case flags&unix.O_TRUNC != 0:
		if err = unix.Ftruncate(fd, 0); err != nil {
			err = &os.PathError{Op: "truncate", Path: st.Path, Err: err}
		}
	}
	if err != nil {
		unix.Close(fd)
		return nil, fst, err
	}
	return newFile(fd, st.Path), fst, nil
}

// Create creates name (O_CREAT|O_EXCL|O_NOFOLLOW, which never follows even
// a dangling symlink) with mode set exactly: the umask would keep the group
// out of a shared file. Whatever is there already is an *ExistsError that
// says what it is and whose.
func (d *Dir) Create(name string, flags int, mode uint32) (*os.File, Info, error) {
	path := d.Join(name)
	fd, err := unix.Openat(d.fd, name, flags|unix.O_CREAT|unix.O_EXCL|fileFlags, mode&0o777)
	if errors.Is(err, unix.EEXIST) {
		st, lerr := d.Lstat(name)
		if lerr != nil {
			return nil, st, &os.PathError{Op: "create", Path: path, Err: err}
		}
		return nil, st, &ExistsError{Info: st}
	}
	if err != nil {
		return nil, Info{}, &os.PathError{Op: "create", Path: path, Err: err}
	}
	if err := unix.Fchmod(fd, mode); err != nil {
		unix.Close(fd)
		unix.Unlinkat(d.fd, name, 0)
		return nil, Info{}, &os.PathError{Op: "chmod", Path: path, Err: err}
	}
	st, err := fdInfo(fd, path)
	if err != nil {
		unix.Close(fd)
		return nil, st, err
	}
	return newFile(fd, path), st, nil
}

// OpenOrCreate opens the regular file name, creating it (mode set exactly)
// when missing; created says this call made it. The checks are Open's.
func (d *Dir) OpenOrCreate(name string, flags int, mode uint32) (f *os.File, st Info, created bool, err error) {
	for try := 0; try < 5; try++ {
		f, st, err = d.Open(name, flags&^unix.O_CREAT)
		if !errors.Is(err, unix.ENOENT) && !errors.Is(err, ErrChanged) {
			return f, st, false, err
		}
		if errors.Is(err, ErrChanged) {
			continue
		}
		f, st, err = d.Create(name, flags&^unix.O_CREAT, mode)
		var ee *ExistsError
		if !errors.As(err, &ee) {
			return f, st, err == nil, err
		}
	}
	return nil, st, false, fmt.Errorf("%s keeps changing while it is opened: someone is replacing it; check who can write %s", d.Join(name), d.path)
}

// ReadFile reads the regular file name whole; a file larger than max
// bytes is an error.
func (d *Dir) ReadFile(name string, max int64) ([]byte, Info, error) {
	f, st, err := d.Open(name, unix.O_RDONLY)
	if err != nil {
		return nil, st, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, st, fmt.Errorf("reading %s: %w", st.Path, err)
	}
	if int64(len(b)) > max {
		return nil, st, fmt.Errorf("%s is larger than %d bytes: not a file gpu-hold wrote", st.Path, max)
	}
	return b, st, nil
}

// Stat describes an open file.
func Stat(f *os.File) (Info, error) { return fdInfo(int(f.Fd()), f.Name()) }

func fdInfo(fd int, path string) (Info, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return Info{}, &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	return infoOf(path, &st), nil
}

// CreateOrTruncate is the shell's > without its hazards: it creates name
// (mode set exactly) or, when name is this process's own regular file with
// one link, truncates it. A symlink, FIFO, device, another uid's file or a
// hard-linked one is an error that says what it is, and is left as it was.
func (d *Dir) CreateOrTruncate(name string, mode uint32) (*os.File, Info, error) {
	f, st, err := d.Create(name, unix.O_WRONLY, mode)
	var ee *ExistsError
	if !errors.As(err, &ee) {
		return f, st, err
	}
	if !ee.Info.IsRegular() {
		return nil, ee.Info, &NotRegularError{Info: ee.Info, Want: "a regular file"}
	}
	f, st, err = d.Open(name, unix.O_WRONLY)
	if err != nil {
		return nil, st, err
	}
	if euid := os.Geteuid(); int(st.UID) != euid {
		f.Close()
		return nil, st, fmt.Errorf("%s exists and belongs to uid %d, not to uid %d: never truncated; remove it or choose another name", st.Path, st.UID, euid)
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, st, fmt.Errorf("truncating %s: %w", st.Path, err)
	}
	return f, st, nil
}
