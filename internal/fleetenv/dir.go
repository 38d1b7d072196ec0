// dir.go owns the choice of the queue directory and its checks: --dir, else
// $GPU_HOLD_DIR, else /var/lib/gpu-hold when it exists, else the user's
// state directory; whether it is shared; and the check of a fleet
// directory's set-up that gpu-hold doctor prints.
package fleetenv

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/device"
	"github.com/gpu-hold/gpu-hold/internal/record"
	"github.com/gpu-hold/gpu-hold/internal/safefs"
	"github.com/gpu-hold/gpu-hold/queue"
)

// FleetDir is the shared queue directory of a fleet host.
const FleetDir = "/var/lib/gpu-hold"

// FleetGroup is the group an admin makes for the users of FleetDir.
const FleetGroup = "gpu-hold"

// ResolveDir returns the queue directory to use, creating the per-user
// default when needed, and checks it is a writable directory.
func ResolveDir(flag string) (string, error) {
	dir, how, userDefault, err := chooseDir(flag)
	if err != nil {
		return "", err
	}
	if userDefault {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return "", fmt.Errorf("cannot create queue dir %s (%s): %v; set --dir or GPU_HOLD_DIR", dir, how, err)
		}
	}
	if err := checkDir(dir, how, unix.W_OK|unix.X_OK); err != nil {
		return "", err
	}
	return dir, nil
}

// FindDir is ResolveDir for commands that only read (queue, cancel, show,
// doctor): it creates nothing and needs only read and search access. A
// per-user default that does not exist yet is returned without an error:
// it has no resources. On an error, dir is still the chosen path when
// there is one, for doctor to report on.
func FindDir(flag string) (dir string, err error) {
	dir, how, userDefault, err := chooseDir(flag)
	if err != nil {
		return "", err
	}
	if _, err := os.Lstat(dir); userDefault && errors.Is(err, os.ErrNotExist) {
		return dir, nil
	}
	return dir, checkDir(dir, how, unix.R_OK|unix.X_OK)
}

// chooseDir picks the queue dir and says how it was chosen; userDefault
// says it is the per-user state dir, which gpu-hold may create.
func chooseDir(flag string) (dir, how string, userDefault bool, err error) {
	if flag != "" {
		return flag, "--dir", false, nil
	}
	if env := os.Getenv("GPU_HOLD_DIR"); env != "" {
		return env, "$GPU_HOLD_DIR", false, nil
	}
	if fi, err := os.Stat(FleetDir); err == nil && fi.IsDir() {
		return FleetDir, "the fleet directory", false, nil
	}
	base := os.Getenv("XDG_STATE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", "", false, fmt.Errorf("no queue directory: set --dir or GPU_HOLD_DIR (no home directory: %v)", err)
		}
		base = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(base, "gpu-hold"), "the user state dir", true, nil
}

// checkDir checks dir is a directory the caller may access with mode.
func checkDir(dir, how string, mode uint32) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("queue dir %s (%s) does not exist: create it or set --dir/GPU_HOLD_DIR to a directory", dir, how)
	}
	if !fi.IsDir() {
		return fmt.Errorf("queue dir %s (%s) is not a directory: point --dir or GPU_HOLD_DIR at a directory", dir, how)
	}
	if err := unix.Access(dir, mode); err != nil {
		what := "writable"
		if mode&unix.W_OK == 0 {
			what = "readable"
		}
		return fmt.Errorf("queue dir %s is not %s by uid %d: %s", dir, what, os.Getuid(), accessHint(dir))
	}
	return nil
}

// accessHint says what a user locked out of dir can do: join its group
// (named from the dir itself) when that group may write it.
func accessHint(dir string) string {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil || st.Mode&0o020 == 0 {
		return "set GPU_HOLD_DIR to a directory of your own, or ask an admin to set " + dir + " up for every user (see gpu-hold doctor)"
	}
	return "ask an admin to add you to group " + queue.GroupName(st.Gid) + " (then log in again), or set GPU_HOLD_DIR to a directory of your own"
}

// SharedDir reports whether queue dir dir (of stat st) is used by more
// than its owner: the fleet dir, or one others may write (group or world,
// as the queue package shares its resource dirs then).
func SharedDir(dir string, st unix.Stat_t) bool {
	return filepath.Clean(dir) == FleetDir || st.Mode&0o022 != 0
}

// dirGroup names the group that users of a shared queue dir (of stat st)
// join: the dir's own, unless that is root's (no users' group made yet).
func dirGroup(st unix.Stat_t) string {
	if st.Gid != 0 {
		return queue.GroupName(st.Gid)
	}
	return FleetGroup
}

// installDirs is the command an admin makes shared dirs with, of group.
func installDirs(group string, paths ...string) string {
	return "install -d -m 3775 -o root -g " + group + " " + strings.Join(paths, " ")
}

// DirReport is gpu-hold doctor's check of a queue dir's set-up.
type DirReport struct {
	Path string `json:"path"`
	// Fleet: the dir is shared (others may write it, or it is FleetDir), so
	// its set-up matters; a private dir has nothing to check.
	Fleet    bool         `json:"fleet"`
	Group    string       `json:"group,omitempty"` // the group its users join
	Problems []DirProblem `json:"problems"`
}

// DirProblem is one thing wrong and the command that fixes it.
type DirProblem struct {
	Path    string `json:"path"`
	Problem string `json:"problem"`
	Fix     string `json:"fix"`
}

// dirCheck collects one queue dir's problems.
type dirCheck struct {
	rep   *DirReport
	gid   uint32 // the group files should have; valid when hasID
	hasID bool   // false when the queue dir's group is root's: no users' group yet
}

func (c *dirCheck) add(path, fix, format string, a ...any) {
	c.rep.Problems = append(c.rep.Problems, DirProblem{Path: path, Problem: fmt.Sprintf(format, a...), Fix: fix})
}

// CheckQueueDir checks the set-up of queue dir dir for gpu-hold doctor. A
// fleet dir, each resource dir in it and its records/ must be root's, of
// the users' group, setgid, sticky and group-writable (03775 or 03770);
// seq and token regular, single-linked and group-writable; resources.json
// root's and writable by root only. want names resource dirs that should
// exist (an admin makes them: one a user's hold makes is that user's, and
// other users' holds refuse it).
func CheckQueueDir(dir string, want []string) DirReport {
	rep := DirReport{Path: dir, Problems: []DirProblem{}}
	c := &dirCheck{rep: &rep}
	var st unix.Stat_t
	err := unix.Stat(dir, &st)
	rep.Fleet = SharedDir(dir, st) // st is zero on an error: then the path alone decides
	if !rep.Fleet {
		if err != nil && !errors.Is(err, unix.ENOENT) {
			c.add(dir, "", "cannot stat it: %v", err)
		}
		return rep
	}
	rep.Group = dirGroup(st)
	if err != nil {
		c.add(dir, c.install(dir), "cannot stat it (%v): holds cannot queue here", err)
		return rep
	}
	if st.Gid != 0 {
		c.gid, c.hasID = st.Gid, true
	}
	c.dir(dir, st)
	c.resourcesFile(filepath.Join(dir, device.ResourcesFile))
	c.resourceDirs(dir, want)
	return rep
}

// install is the command that makes a fleet dir (or fixes one) at once.
func (c *dirCheck) install(path string) string {
	return installDirs(c.rep.Group, path)
}

// dir checks one directory's owner, group and mode.
func (c *dirCheck) dir(path string, st unix.Stat_t) {
	if st.Uid != 0 {
		c.add(path, "chown root "+path, "owned by uid %d, who can remove or forge anything in it (the sticky bit does not bind a directory's owner)", st.Uid)
	}
	if !c.hasID || st.Gid != c.gid {
		what := "users join group " + c.rep.Group + " to queue here"
		if c.hasID {
			what = "the queue dir's group is " + c.rep.Group
		}
		fix := "chgrp " + c.rep.Group + " " + path
		if _, err := user.LookupGroup(c.rep.Group); !c.hasID && err != nil {
			fix = "groupadd --system " + c.rep.Group + "; " + fix
		}
		c.add(path, fix, "group %s: %s", queue.GroupName(st.Gid), what)
	}
	if m := st.Mode & 0o7777; m != 0o3775 && m != 0o3770 {
		c.add(path, "chmod 3775 "+path, "mode %04o, want 3775 (setgid: what is made in it keeps the group; sticky: nobody removes another's files; group-writable)", m)
	}
}

// lstat says whether path exists and is of kind; a path of another kind
// (planted?) or that cannot be stat'ed is a problem.
func (c *dirCheck) lstat(path string, kind uint32) (st unix.Stat_t, exists, ok bool) {
	if err := unix.Lstat(path, &st); err != nil {
		if !errors.Is(err, unix.ENOENT) {
			c.add(path, "", "cannot stat it: %v", err)
			return st, true, false
		}
		return st, false, false
	}
	if st.Mode&unix.S_IFMT != kind {
		c.add(path, "rm "+path, "is %s (planted?): gpu-hold never follows or opens it", safefs.Kind(st.Mode))
		return st, true, false
	}
	return st, true, true
}

// resourceDirs checks every resource dir in dir, and those of want.
func (c *dirCheck) resourceDirs(dir string, want []string) {
	names, err := os.ReadDir(dir)
	if err != nil {
		c.add(dir, "", "cannot list it: %v", err)
		return
	}
	seen := map[string]bool{}
	for _, e := range names {
		if queue.ValidResource(e.Name()) != nil || e.Type().IsRegular() {
			continue // resources.json, metrics, garbage: not resource dirs
		}
		seen[e.Name()] = true
		c.resourceDir(filepath.Join(dir, e.Name()))
	}
	for _, name := range want {
		if p := filepath.Join(dir, name); !seen[name] {
			c.add(p, c.install(p)+" "+RecordsDir(p), "missing: in a shared directory a user's hold makes none; root's reap timer (gpu-hold reap --all) makes a declared one, or an admin with the command here")
		}
	}
}

// resourceDir checks a resource dir, its records/, seq and token.
func (c *dirCheck) resourceDir(path string) {
	st, _, ok := c.lstat(path, unix.S_IFDIR)
	if !ok {
		return
	}
	c.dir(path, st)
	rec := RecordsDir(path)
	if st, exists, ok := c.lstat(rec, unix.S_IFDIR); ok {
		c.dir(rec, st)
	} else if !exists {
		c.add(rec, c.install(rec), "missing: the first hold would make it, owned by its user")
	}
	for _, name := range []string{"seq", "token"} {
		c.sharedFile(filepath.Join(path, name))
	}
}

// sharedFile checks a file every member's hold writes (seq, token).
func (c *dirCheck) sharedFile(path string) {
	st, _, ok := c.lstat(path, unix.S_IFREG)
	if !ok {
		return
	}
	if st.Nlink != 1 {
		c.add(path, "rm "+path+" (the next hold makes it anew)", "has %d links: a hard link planted to another file", st.Nlink)
	}
	if st.Mode&0o020 == 0 {
		c.add(path, "chmod g+w "+path, "mode %04o: other members of group %s cannot write it, so their holds fail", st.Mode&0o7777, c.rep.Group)
	}
	if c.hasID && st.Gid != c.gid {
		c.add(path, "chgrp "+c.rep.Group+" "+path, "group %s, not %s: its members cannot write it", queue.GroupName(st.Gid), c.rep.Group)
	}
}

// resourcesFile checks resources.json: whoever may write it chooses every
// hold's device nodes.
func (c *dirCheck) resourcesFile(path string) {
	st, _, ok := c.lstat(path, unix.S_IFREG)
	if !ok {
		return
	}
	if st.Uid != 0 {
		c.add(path, "chown root: "+path, "owned by uid %d, who can change the device nodes of every hold", st.Uid)
	}
	if st.Mode&0o022 != 0 {
		c.add(path, "chmod 644 "+path, "mode %04o: others can change the device nodes of every hold", st.Mode&0o7777)
	}
}

// RecordsDir is the records/ dir of resource dir res.
func RecordsDir(res string) string { return filepath.Dir(record.RecordPath(res, "x")) }
