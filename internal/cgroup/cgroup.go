// Package cgroup holds the payload's cgroup: containment, not tracking.
// cgroup.go owns it: where the host allows it (cgroup v2, permission to
// create a child of our own cgroup) the payload is born into a cgroup of its
// own (clone3 CLONE_INTO_CGROUP), which teardown can end atomically with
// cgroup.kill and which keeps members that setsid away. It is removed after
// the hold.
package cgroup

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Cgroup is the payload's own cgroup.
type Cgroup struct {
	Path string    // absolute path in the cgroup2 mount
	fd   int       // O_PATH|O_DIRECTORY fd for SysProcAttr.CgroupFD
	made time.Time // zero for a cgroup named by Open
}

// Mount returns the cgroup v2 mount point ("" when there is none).
func Mount() string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ... mountpoint ... - fstype source options
		fields := strings.Fields(sc.Text())
		for i, fld := range fields {
			if fld == "-" && i+1 < len(fields) && fields[i+1] == "cgroup2" && len(fields) > 4 {
				return fields[4]
			}
		}
	}
	return ""
}

// Own returns our cgroup v2 path relative to the mount.
func Own() string {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "/"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "0::") {
			return strings.TrimPrefix(line, "0::")
		}
	}
	return "/"
}

// New creates <mount>/<our cgroup>/gpu-hold-<holdID>.
func New(holdID string) (*Cgroup, error) {
	mnt := Mount()
	if mnt == "" {
		return nil, errors.New("no cgroup v2 mount")
	}
	parent := filepath.Join(mnt, Own())
	sweepCgroups(parent)
	path := filepath.Join(parent, "gpu-hold-"+holdID)
	if err := os.Mkdir(path, 0o755); err != nil {
		return nil, fmt.Errorf("cannot create cgroup %s: %w", path, err)
	}
	if _, err := os.Stat(filepath.Join(path, "cgroup.kill")); err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("cgroup %s has no cgroup.kill (kernel older than 5.14)", path)
	}
	fd, err := unix.Open(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("cannot open cgroup %s: %w", path, err)
	}
	return &Cgroup{Path: path, fd: fd, made: time.Now()}, nil
}

// Fresh reports whether the cgroup New made is young enough that no other
// hold's sweep can have removed it (a sweep takes an empty one only once it
// is staleCgroupAge old): one made ahead of its payload, at the head of the
// queue, is used only while fresh.
func (c *Cgroup) Fresh() bool {
	return !c.made.IsZero() && time.Since(c.made) < staleCgroupAge/2
}

// staleCgroupAge is how long an empty gpu-hold cgroup must have been left
// before another hold removes it.
const staleCgroupAge = 10 * time.Minute

// sweepCgroups removes the empty gpu-hold-* cgroups beside ours that a hold
// which died (or whose survivor has since gone) left behind long ago. A
// populated one is never touched: a reaper still needs it.
func sweepCgroups(parent string) {
	dirs, err := filepath.Glob(filepath.Join(parent, "gpu-hold-*"))
	if err != nil {
		return
	}
	for _, d := range dirs {
		fi, err := os.Stat(d)
		if err != nil || !fi.IsDir() || time.Since(fi.ModTime()) < staleCgroupAge {
			continue
		}
		if b, err := os.ReadFile(filepath.Join(d, "cgroup.events")); err == nil && bytes.Contains(b, []byte("populated 0")) {
			os.Remove(d) // rmdir: fails harmlessly if a process just joined
		}
	}
}

// Open names an existing cgroup (a dead holder's) for teardown.
func Open(path string) *Cgroup {
	if path == "" {
		return nil
	}
	if _, err := os.Stat(filepath.Join(path, "cgroup.procs")); err != nil {
		return nil
	}
	return &Cgroup{Path: path, fd: -1}
}

// FD is the cgroup's O_PATH directory fd, for SysProcAttr.CgroupFD (-1
// for a cgroup named by Open).
func (c *Cgroup) FD() int { return c.fd }

// PIDs returns the pids in the cgroup now.
func (c *Cgroup) PIDs() []int {
	b, err := os.ReadFile(filepath.Join(c.Path, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range bytes.Fields(b) {
		if pid, err := strconv.Atoi(string(f)); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// WaitEmpty waits, up to bound, until the cgroup has no process left. The
// kernel notifies a change of cgroup.events to poll(2) as POLLPRI.
func (c *Cgroup) WaitEmpty(bound time.Duration) bool {
	f, err := os.Open(filepath.Join(c.Path, "cgroup.events"))
	if err != nil {
		return true
	}
	defer f.Close()
	deadline := time.Now().Add(bound)
	buf := make([]byte, 256)
	for {
		n, _ := f.ReadAt(buf, 0)
		if !bytes.Contains(buf[:n], []byte("populated 1")) {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		fds := []unix.PollFd{{Fd: int32(f.Fd()), Events: unix.POLLPRI}}
		unix.Poll(fds, int(left/time.Millisecond)+1)
	}
}

// Kill writes cgroup.kill: SIGKILL to every process in it, atomically
// against forks racing the kill.
func (c *Cgroup) Kill() error {
	return os.WriteFile(filepath.Join(c.Path, "cgroup.kill"), []byte("1"), 0)
}

// Remove removes the cgroup once it is empty (waiting up to bound for the
// kernel to finish tearing down its last members).
func (c *Cgroup) Remove(bound time.Duration) error {
	if c.fd >= 0 {
		unix.Close(c.fd)
		c.fd = -1
	}
	c.WaitEmpty(bound)
	if err := os.Remove(c.Path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("cannot remove cgroup %s: %w", c.Path, err)
	}
	return nil
}
