// cgroup.go owns the kernel floor: a bare cgroup the bench creates
// (gpu-hold-bench-MARK-N under the cgroup v2 mount), a tree started inside
// it, one write to cgroup.kill, and the time until cgroup.events says
// "populated 0". It also owns a plain per-pid SIGKILL loop over the same
// cgroup's members, for reference.
package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// benchCgroup is one bare cgroup of the bench.
type benchCgroup struct {
	path  string
	mount string // the cgroup v2 mount it is under
	fd    *os.File
}

// newBenchCgroup creates a fresh cgroup named for the bench's marker.
func (b *bench) newBenchCgroup() (*benchCgroup, error) {
	b.seq++
	path := filepath.Join(b.cgDir, fmt.Sprintf("gpu-hold-%s-%d", b.mark, b.seq))
	if err := os.Mkdir(path, 0o755); err != nil {
		return nil, fmt.Errorf("creating the floor's cgroup: %w (the floor needs root and cgroup v2 at %s)", err, b.cgDir)
	}
	fd, err := os.Open(path)
	if err != nil {
		os.Remove(path)
		return nil, err
	}
	return &benchCgroup{path: path, mount: b.cgDir, fd: fd}, nil
}

// attr places a child into the cgroup at its birth.
func (c *benchCgroup) attr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(c.fd.Fd())}
}

// populated reads cgroup.events.
func (c *benchCgroup) populated() (bool, error) {
	data, err := os.ReadFile(filepath.Join(c.path, "cgroup.events"))
	if err != nil {
		return false, err
	}
	return bytes.Contains(data, []byte("populated 1")), nil
}

// killFloor writes cgroup.kill once and returns the time until the cgroup
// is unpopulated.
func (c *benchCgroup) killFloor(limit time.Duration) (time.Duration, error) {
	t0 := time.Now()
	if err := os.WriteFile(filepath.Join(c.path, "cgroup.kill"), []byte("1"), 0); err != nil {
		return 0, fmt.Errorf("cgroup.kill: %w", err)
	}
	return c.waitEmpty(t0, limit)
}

// killLoop ends the members one pid at a time, as a tool without
// cgroup.kill does: for each pid in cgroup.procs, a pidfd, a check that the
// pid is still in this cgroup (so a reused pid is never signalled), and
// SIGKILL through the pidfd; repeated until the cgroup is unpopulated.
func (c *benchCgroup) killLoop(limit time.Duration) (time.Duration, error) {
	t0 := time.Now()
	rel := "0::" + strings.TrimPrefix(c.path, c.mount) + "\n"
	for time.Since(t0) < limit {
		data, err := os.ReadFile(filepath.Join(c.path, "cgroup.procs"))
		if err != nil {
			return 0, err
		}
		pids := strings.Fields(string(data))
		if len(pids) == 0 {
			break
		}
		for _, p := range pids {
			pid, err := strconv.Atoi(p)
			if err != nil {
				continue
			}
			fd, err := unix.PidfdOpen(pid, 0)
			if err != nil {
				continue
			}
			if cg, err := os.ReadFile("/proc/" + p + "/cgroup"); err == nil && strings.Contains("\n"+string(cg), "\n"+rel) {
				unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
			}
			unix.Close(fd)
		}
	}
	return c.waitEmpty(t0, limit)
}

// waitEmpty polls cgroup.events until unpopulated.
func (c *benchCgroup) waitEmpty(t0 time.Time, limit time.Duration) (time.Duration, error) {
	for {
		pop, err := c.populated()
		if err != nil {
			return 0, err
		}
		if !pop {
			return time.Since(t0), nil
		}
		if time.Since(t0) > limit {
			return 0, fmt.Errorf("cgroup %s still populated after %v", c.path, limit)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// remove kills what is left and removes the cgroup.
func (c *benchCgroup) remove() {
	if c.fd != nil {
		c.fd.Close()
	}
	os.WriteFile(filepath.Join(c.path, "cgroup.kill"), []byte("1"), 0)
	for i := 0; i < 100; i++ {
		if os.Remove(c.path) == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// removeBenchCgroups removes cgroups left by this run (same marker).
func removeBenchCgroups(cgDir, mark string) {
	matches, _ := filepath.Glob(filepath.Join(cgDir, "gpu-hold-"+mark+"-*"))
	for _, m := range matches {
		(&benchCgroup{path: m}).remove()
	}
}
