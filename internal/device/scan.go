// Package device holds the host's device checks that run no hold: the
// resources a hold can queue for and the device nodes each names
// (resources.go), and which processes hold those nodes (E16): found by
// walking /proc/*/fd and comparing what each fd refers to (node.go), or, where
// the kernel can say which processes have them open, reading only those
// (kernel.go), with each holder's DRM memory from fdinfo (drm.go); and the
// check after teardown, its baseline and its warn|wait|fail policy
// (check.go, policy.go). scan.go owns the walk of /proc.
package device

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/user"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/proc"
)

// ScanHolders returns every process, other than the caller, that has
// one of the nodes matched by patterns open, one entry per (process, node).
// Kernel threads and zombies are skipped, processes that vanish mid-scan are
// tolerated, and a process whose fds cannot be read (another user's, when not
// root) is not seen. No matching node means no holders.
func ScanHolders(patterns []string) ([]Holder, error) {
	hs, _, _, err := ScanHoldersWith(patterns, currentFinder())
	return hs, err
}

// indexOf maps each node's identity to its path.
func indexOf(nodes []Node) map[nodeKey]string {
	index := make(map[nodeKey]string, len(nodes))
	for _, n := range nodes {
		index[n.key] = n.Path
	}
	return index
}

// scanPIDs checks only the given processes (a kernel Finder's candidates),
// each as the walk checks it.
func scanPIDs(nodes []Node, pids []int) []Holder {
	index := indexOf(nodes)
	self := os.Getpid()
	users := map[int]string{}
	seen := make(map[int]bool, len(pids))
	var out []Holder
	for _, pid := range pids {
		if pid <= 0 || pid == self || seen[pid] {
			continue
		}
		seen[pid] = true
		out = append(out, scanPID(pid, index, users)...)
	}
	sortHolders(out)
	return out
}

// scan walks /proc once for the given nodes.
func scan(nodes []Node) ([]Holder, error) {
	index := indexOf(nodes)
	d, err := os.Open("/proc")
	if err != nil {
		return nil, fmt.Errorf("cannot scan for device holders: %v", err)
	}
	defer d.Close()
	self := os.Getpid()
	users := map[int]string{}
	var out []Holder
	for {
		names, rerr := d.Readdirnames(1024)
		for _, name := range names {
			pid, err := strconv.Atoi(name)
			if err != nil || pid <= 0 || pid == self {
				continue
			}
			out = append(out, scanPID(pid, index, users)...)
		}
		if rerr != nil || len(names) == 0 {
			break
		}
	}
	sortHolders(out)
	return out, nil
}

// sortHolders orders holders by pid, then node.
func sortHolders(out []Holder) {
	sort.Slice(out, func(i, j int) bool {
		if out[i].PID != out[j].PID {
			return out[i].PID < out[j].PID
		}
		return out[i].Node < out[j].Node
	})
}

// scanPID returns what process pid holds among the indexed nodes. Every read
// goes through a dirfd on /proc/PID, which stays bound to this process: a read
// through it that succeeds after ReadStat proves the start time read is this
// process's, even if the pid is reused later.
func scanPID(pid int, index map[nodeKey]string, users map[int]string) []Holder {
	dirfd, err := unix.Open("/proc/"+strconv.Itoa(pid), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer func() { unix.Close(dirfd) }()
	st, err := proc.ReadStat(pid)
	if err != nil || st.Dead() || pid == 2 || st.PPID == 2 { // gone, zombie, kernel thread
		return nil
	}
	if st.State == 'Z' {
		// Its main thread has exited while others run, and shows no files:
		// they are read through a live thread's directory, as bound to
		// this process as /proc/PID (the thread lives only while it does).
		tid := proc.LiveThread(pid)
		if tid == 0 {
			return nil
		}
		tdir, err := unix.Openat(dirfd, "task/"+strconv.Itoa(tid), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil
		}
		unix.Close(dirfd)
		dirfd = tdir
	}
	fdDir, err := unix.Openat(dirfd, "fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil // gone, or not ours to read
	}
	f := os.NewFile(uintptr(fdDir), "fd")
	defer f.Close()
	names, _ := f.Readdirnames(-1)
	byNode := map[string]*Holder{}
	var order []string
	for _, name := range names {
		fd, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		// Stat what the fd refers to; DONT_SYNC so a hung network or FUSE
		// file system answers from its cache instead of blocking the scan.
		var stx unix.Statx_t
		if unix.Statx(fdDir, name, unix.AT_STATX_DONT_SYNC, unix.STATX_TYPE|unix.STATX_INO, &stx) != nil {
			continue
		}
		key, ok := keyOf(&stx)
		if !ok {
			continue
		}
		node, ok := index[key]
		if !ok {
			continue
		}
		h := byNode[node]
		if h == nil {
			h = &Holder{Ident: st.Ident, Node: node}
			byNode[node] = h
			order = append(order, node)
		}
		h.FDs = append(h.FDs, fd)
	}
	if len(order) == 0 {
		return nil
	}
	uid, ok := readEUID(dirfd)
	if !ok {
		return nil // exited while we looked
	}
	user := lookupUser(uid, users)
	cmd := readCommand(dirfd, st.Comm)
	out := make([]Holder, 0, len(order))
	for _, node := range order {
		h := byNode[node]
		h.UID, h.User, h.Command = uid, user, cmd
		addDRM(dirfd, h)
		out = append(out, *h)
	}
	return out
}

// readEUID reads the effective uid from /proc/PID/status.
func readEUID(dirfd int) (int, bool) {
	b, err := readAt(dirfd, "status", 4096)
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			f := strings.Fields(rest)
			if len(f) >= 2 {
				uid, err := strconv.Atoi(f[1])
				return uid, err == nil
			}
		}
	}
	return 0, false
}

// lookupUser names uid, caching per scan; an unknown uid has no name.
func lookupUser(uid int, cache map[int]string) string {
	if name, ok := cache[uid]; ok {
		return name
	}
	name := ""
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		name = u.Username
	}
	cache[uid] = name
	return name
}

// maxCommand bounds the command recorded for a holder.
const maxCommand = 256

// readCommand returns the process's cmdline with NULs as spaces, at most
// maxCommand bytes, or [comm] when the cmdline is empty.
func readCommand(dirfd int, comm string) string {
	b, err := readAt(dirfd, "cmdline", maxCommand+1)
	b = bytes.TrimRight(b, "\x00")
	if err != nil || len(b) == 0 {
		return "[" + comm + "]"
	}
	cut := len(b) > maxCommand
	if cut {
		b = b[:maxCommand]
	}
	s := strings.ToValidUTF8(string(bytes.ReplaceAll(b, []byte{0}, []byte{' '})), "?")
	if cut {
		s += "..."
	}
	return s
}

// readAt reads at most max bytes of a file relative to dirfd.
func readAt(dirfd int, name string, max int) ([]byte, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	buf := make([]byte, max)
	n := 0
	for n < max {
		m, err := unix.Read(fd, buf[n:])
		if err != nil {
			return buf[:n], err
		}
		if m == 0 {
			break
		}
		n += m
	}
	return buf[:n], nil
}
