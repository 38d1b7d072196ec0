// find.go owns finding a dead holder's cgroup by its hold id in the
// kernel's own tree: a successor needs no file another user could have
// written (a record) to name it, and it enters no directory another user
// could have made.
package cgroup

import (
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// findLimit bounds the directories a Find enters: a host has hundreds
// of cgroups, a busy container host some thousands.
const findLimit = 1 << 16

// Find returns the cgroups named gpu-hold-<holdID> that uid owns, nearest
// the root first, and whether the walk was cut short at findLimit. The
// walk of the cgroup v2 hierarchy enters only directories that root or
// uid owns, so no component of what it returns was made by another user
// (a cgroup's owner is its creator; only root can give one away). A hold
// makes its payload's cgroup under its own, with that name, owned by its
// uid: this is where it is, whatever the hold's record says.
func Find(holdID string, uid int) (paths []string, cut bool) {
	mnt := Mount()
	if mnt == "" || holdID == "" || strings.ContainsAny(holdID, "/\x00") {
		return nil, false
	}
	want := "gpu-hold-" + holdID
	queue, entered := []string{mnt}, 0
	for len(queue) > 0 {
		dir := queue[0]
		queue = queue[1:]
		if entered++; entered > findLimit {
			return paths, true
		}
		for _, name := range subdirs(dir) {
			p := filepath.Join(dir, name)
			var st unix.Stat_t
			if unix.Lstat(p, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Uid != 0 && int(st.Uid) != uid {
				continue
			}
			if name == want && int(st.Uid) == uid {
				paths = append(paths, p)
			}
			queue = append(queue, p)
		}
	}
	return paths, false
}

// subdirs lists the directories in dir (a cgroup's children), unsorted.
func subdirs(dir string) []string {
	f, err := os.Open(dir)
	if err != nil {
		return nil
	}
	defer f.Close()
	ents, _ := f.ReadDir(-1)
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}

// Populated reports whether the cgroup at path has a process in it (or in
// a child).
func Populated(path string) bool {
	b, err := os.ReadFile(filepath.Join(path, "cgroup.events"))
	return err == nil && strings.Contains(string(b), "populated 1")
}
