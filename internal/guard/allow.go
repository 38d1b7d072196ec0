// allow.go owns the guard's allow-list: the host's own daemons that may
// hold a device without the token (a display server, a monitoring agent),
// by executable path and/or uid, from a JSON file an admin writes:
//
//	{"allow": [
//	  {"exe": "/usr/lib/xorg/Xorg"},
//	  {"exe": "/usr/bin/nvidia-persistenced", "uid": 0},
//	  {"uid": 990}
//	]}
//
// An entry matches a process when every field it gives matches. The
// executable is the kernel's /proc/PID/exe, read and then checked to
// still be that process, and it must be the very file the entry names
// here (device and inode): a path alone is what any user can show, by
// mounting a program of its own over it in a mount namespace of its own. The file counts only when it is a regular file
// of root (or the guard's own user) that nobody else can write: a user
// who could edit it could allow-list anything.
package guard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/proc"
)

// AllowList is the processes that may hold a device without the token.
type AllowList struct {
	Allow []AllowEntry `json:"allow"`
}

// AllowEntry is one rule; a nil field is not checked. An entry with no
// field is refused (it would allow everything).
type AllowEntry struct {
	Exe string `json:"exe,omitempty"`
	UID *int   `json:"uid,omitempty"`
}

// maxAllowLen bounds what is read of the allow-list.
const maxAllowLen = 1 << 20

// LoadAllowList reads and checks the allow-list at path.
func LoadAllowList(path string) (*AllowList, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("cannot open the allow-list %s: %v (it must be a regular file, not a symlink)", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("cannot stat the allow-list %s: %v", path, err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return nil, fmt.Errorf("the allow-list %s is not a regular file: replace it with one", path)
	case st.Uid != 0 && int(st.Uid) != os.Geteuid():
		return nil, fmt.Errorf("the allow-list %s belongs to uid %d: only root may allow-list processes (chown root %s)", path, st.Uid, path)
	case st.Mode&0o022 != 0:
		return nil, fmt.Errorf("the allow-list %s is writable by others (mode %04o): chmod go-w %s", path, st.Mode&0o7777, path)
	}
	b := make([]byte, maxAllowLen+1)
	n, _ := f.Read(b)
	if n > maxAllowLen {
		return nil, fmt.Errorf("the allow-list %s is larger than %d bytes", path, maxAllowLen)
	}
	return parseAllowList(path, b[:n])
}

func parseAllowList(path string, b []byte) (*AllowList, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var a AllowList
	if err := dec.Decode(&a); err != nil {
		return nil, fmt.Errorf("allow-list %s: bad JSON (%v); format: {\"allow\": [{\"exe\": \"/usr/lib/xorg/Xorg\"}, {\"uid\": 990}]}", path, err)
	}
	for i, e := range a.Allow {
		switch {
		case e.Exe == "" && e.UID == nil:
			return nil, fmt.Errorf("allow-list %s: entry %d names neither exe nor uid, which would allow every process: give one", path, i+1)
		case e.Exe != "" && !filepath.IsAbs(e.Exe):
			return nil, fmt.Errorf("allow-list %s: entry %d: exe %q is not an absolute path", path, i+1, e.Exe)
		}
	}
	return &a, nil
}

// allows reports whether process id (effective uid uid) is allow-listed.
// A nil list allows nothing.
func (a *AllowList) allows(id proc.Ident, uid int) bool {
	if a == nil || len(a.Allow) == 0 {
		return false
	}
	for _, e := range a.Allow {
		if e.UID != nil && *e.UID != uid {
			continue
		}
		if e.Exe != "" && !exeIs(id, e.Exe) {
			continue
		}
		return true
	}
	return false
}

// exeOf is id's executable as its own mount namespace names it (the
// kernel's /proc/PID/exe), for reports; "" when it cannot be read or the
// pid no longer names id.
func exeOf(id proc.Ident) string {
	exe, err := os.Readlink("/proc/" + strconv.Itoa(id.PID) + "/exe")
	if err != nil || !proc.Alive(id) {
		return ""
	}
	return exe
}

// exeIs reports whether id's executable (the kernel's /proc/PID/exe) is
// the file at path: the same path, and the same device and inode as path
// has in the guard's own mount namespace; false when it cannot be read or
// the pid no longer names id.
func exeIs(id proc.Ident, path string) bool {
	link := "/proc/" + strconv.Itoa(id.PID) + "/exe"
	exe, err := os.Readlink(link)
	if err != nil || exe != path {
		return false
	}
	var got, want unix.Stat_t
	if unix.Stat(link, &got) != nil || unix.Stat(path, &want) != nil || got.Dev != want.Dev || got.Ino != want.Ino {
		return false
	}
	return proc.Alive(id)
}

// uidOnly is the uids the list allows whatever the executable (for the
// device filter, which tells a process's uid at open).
func (a *AllowList) uidOnly() map[uint32]bool {
	out := map[uint32]bool{}
	if a == nil {
		return out
	}
	for _, e := range a.Allow {
		if e.Exe == "" && e.UID != nil && *e.UID >= 0 {
			out[uint32(*e.UID)] = true
		}
	}
	return out
}

// hasExe reports whether some entry names an executable.
func (a *AllowList) hasExe() bool {
	if a == nil {
		return false
	}
	for _, e := range a.Allow {
		if e.Exe != "" {
			return true
		}
	}
	return false
}

// allowsExe is allows, for the entries that name an executable only.
func (a *AllowList) allowsExe(id proc.Ident, uid int) bool {
	if !a.hasExe() {
		return false
	}
	for _, e := range a.Allow {
		if e.Exe != "" && (e.UID == nil || *e.UID == uid) && exeIs(id, e.Exe) {
			return true
		}
	}
	return false
}
