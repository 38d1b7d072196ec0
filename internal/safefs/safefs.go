// Package safefs owns file access in directories other users can write:
// every file is opened, created, read or removed relative to a checked
// directory fd, never through a symlink, never when it is not a regular
// file (so a FIFO never blocks and a device is never opened), and a file
// with more than one link is never written (it could be someone else's).
// What it finds is reported with its kind and its owner's uid.
package safefs

import (
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Info is what fstat/lstat said of a file: whose it is and what it is.
type Info struct {
	Path    string
	Mode    uint32 // st_mode: type and permission bits
	UID     uint32
	GID     uint32
	Nlink   uint64
	Size    int64
	ModTime time.Time
	Dev     uint64
	Ino     uint64
}

func infoOf(path string, st *unix.Stat_t) Info {
	return Info{Path: path, Mode: st.Mode, UID: st.Uid, GID: st.Gid, Nlink: uint64(st.Nlink), Size: st.Size,
		ModTime: time.Unix(st.Mtim.Unix()), Dev: st.Dev, Ino: st.Ino}
}

// Perm is the permission bits, setgid, setuid and sticky included.
func (i Info) Perm() uint32 { return i.Mode & 0o7777 }

// IsRegular says the file is a regular file.
func (i Info) IsRegular() bool { return i.Mode&unix.S_IFMT == unix.S_IFREG }

// IsDir says the file is a directory.
func (i Info) IsDir() bool { return i.Mode&unix.S_IFMT == unix.S_IFDIR }

// WritableByOthers says the group or others may write the file.
func (i Info) WritableByOthers() bool { return i.Mode&0o022 != 0 }

// Same says i and o are the same file.
func (i Info) Same(o Info) bool { return i.Dev == o.Dev && i.Ino == o.Ino }

// Kind names the file's type for a message: "a symlink", "a FIFO"...
func (i Info) Kind() string { return Kind(i.Mode) }

// Kind names the type in an st_mode for a message.
func Kind(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFLNK:
		return "a symlink"
	case unix.S_IFDIR:
		return "a directory"
	case unix.S_IFIFO:
		return "a FIFO"
	case unix.S_IFCHR, unix.S_IFBLK:
		return "a device node"
	case unix.S_IFSOCK:
		return "a socket"
	case unix.S_IFREG:
		return "a regular file"
	}
	return "not a regular file"
}

// NotRegularError: a name is not a regular file (or, for a directory
// opened, not a directory); it was neither followed nor opened.
type NotRegularError struct {
	Info Info
	Want string // "a regular file" or "a directory"
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%s is %s owned by uid %d, not %s (never followed or opened): remove it (rm %s) if it was planted",
		e.Info.Path, e.Info.Kind(), e.Info.UID, e.Want, e.Info.Path)
}

// LinkedError: a file to be written has other hard links, so writing it
// would write another name's file too, perhaps another user's.
type LinkedError struct{ Info Info }

func (e *LinkedError) Error() string {
	return fmt.Sprintf("%s is a hard link (%d links, owned by uid %d): never written, since that would write the other names' file too; remove it if it was planted",
		e.Info.Path, e.Info.Nlink, e.Info.UID)
}

// ExistsError: a file to be created is there already.
type ExistsError struct{ Info Info }

func (e *ExistsError) Error() string {
	return fmt.Sprintf("%s already exists (%s owned by uid %d, mode %04o): it is never truncated or followed; remove it or choose another name",
		e.Info.Path, e.Info.Kind(), e.Info.UID, e.Info.Perm())
}

// ErrChanged: the name was replaced between the check and the open.
var ErrChanged = errors.New("the file was replaced while it was opened")

// isWrite says flags open for writing.
func isWrite(flags int) bool {
	return flags&(unix.O_WRONLY|unix.O_RDWR) != 0 || flags&unix.O_TRUNC != 0
}

// fileFlags are added to every open of a file: O_NONBLOCK keeps a FIFO that
// appears between the check and the open from blocking.
const fileFlags = unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC

// newFile wraps fd. A regular file's fd stays O_NONBLOCK, which regular
// files ignore.
func newFile(fd int, path string) *os.File { return os.NewFile(uintptr(fd), path) }
