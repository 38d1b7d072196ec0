// device.go owns the device-holder check (E16): which processes have a
// resource's device nodes open, found by walking /proc/*/fd and comparing
// what each fd refers to (st_rdev for device nodes, st_dev/st_ino otherwise),
// with each holder's DRM memory from fdinfo; the baseline of holders present
// before the grant; and the warn|wait|fail policy with its bounded wait.
package hold

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/memfloor"
	"github.com/gpu-hold/gpu-hold/proc"
)

// DeviceNode is one existing node a device pattern matched. Character and
// block devices are matched by the device number they stand for (another
// node for the same device, say inside a container, is the same device);
// anything else by the file's own st_dev/st_ino.
type DeviceNode struct {
	Path string `json:"path"`
	Kind string `json:"kind"`           // "char", "block" or "file"
	Rdev string `json:"rdev,omitempty"` // "major:minor" of a device node
	key  nodeKey
}

// nodeKey is what an open fd is compared with.
type nodeKey struct {
	kind         byte // 'c', 'b' or 'f'
	major, minor uint32
	ino          uint64 // 0 for device nodes
}

// DeviceHolder is one process that has a device node open.
type DeviceHolder struct {
	proc.Ident        // pid and start time: the identity of the holder
	UID        int    `json:"uid"`            // effective uid
	User       string `json:"user,omitempty"` // its name, when it has one
	Command    string `json:"command"`        // cmdline, bounded ([comm] when empty)
	Node       string `json:"node"`           // the device node path it holds
	FDs        []int  `json:"fds"`            // its fds on that node
	// DRMDriver is the fdinfo drm-driver key, when the driver reports one.
	DRMDriver string `json:"drm_driver,omitempty"`
	// DRM is the memory the driver reports in /proc/PID/fdinfo, in bytes, by
	// key without the "drm-" prefix: "memory-vram", "total-gtt",
	// "resident-system0"... Fds of one DRM client (drm-client-id) count once.
	DRM map[string]uint64 `json:"drm,omitempty"`
}

// String describes the holder for a log line or a report.
func (h DeviceHolder) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "pid %d (start %d) uid %d", h.PID, h.Start, h.UID)
	if h.User != "" {
		fmt.Fprintf(&b, " (%s)", h.User)
	}
	fmt.Fprintf(&b, " holds %s: %s", h.Node, h.Command)
	if len(h.DRM) > 0 {
		keys := make([]string, 0, len(h.DRM))
		for k := range h.DRM {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + " " + memfloor.FormatBytes(h.DRM[k])
		}
		fmt.Fprintf(&b, " [%s]", strings.Join(parts, ", "))
	}
	return b.String()
}

// ExpandDevices expands device patterns (paths or globs) to the nodes that
// exist now. Patterns that match nothing, and directories, are skipped; two
// paths to one node (a symlink and its target) yield the first. It fails only
// on a malformed glob.
func ExpandDevices(patterns []string) ([]DeviceNode, error) {
	var nodes []DeviceNode
	seen := map[nodeKey]bool{}
	for _, pat := range patterns {
		paths, err := filepath.Glob(pat)
		if err != nil {
			return nil, fmt.Errorf("device pattern %q is not a valid glob: %v", pat, err)
		}
		for _, p := range paths {
			var stx unix.Statx_t
			if err := unix.Statx(unix.AT_FDCWD, p, unix.AT_STATX_DONT_SYNC, unix.STATX_TYPE|unix.STATX_INO, &stx); err != nil {
				continue // vanished, or a dangling symlink
			}
			key, ok := keyOf(&stx)
			if !ok || seen[key] {
				continue
			}
			seen[key] = true
			n := DeviceNode{Path: p, key: key, Kind: "file"}
			switch key.kind {
			case 'c':
				n.Kind = "char"
			case 'b':
				n.Kind = "block"
			}
			if key.kind != 'f' {
				n.Rdev = fmt.Sprintf("%d:%d", key.major, key.minor)
			}
			nodes = append(nodes, n)
		}
	}
	return nodes, nil
}

// keyOf returns the identity of what a statx result describes; ok is false
// for directories, which are never "a device".
func keyOf(stx *unix.Statx_t) (nodeKey, bool) {
	switch uint32(stx.Mode) & unix.S_IFMT {
	case unix.S_IFDIR:
		return nodeKey{}, false
	case unix.S_IFCHR:
		return nodeKey{kind: 'c', major: stx.Rdev_major, minor: stx.Rdev_minor}, true
	case unix.S_IFBLK:
		return nodeKey{kind: 'b', major: stx.Rdev_major, minor: stx.Rdev_minor}, true
	}
	return nodeKey{kind: 'f', major: stx.Dev_major, minor: stx.Dev_minor, ino: stx.Ino}, true
}

// ScanDeviceHolders returns every process, other than the caller, that has
// one of the nodes matched by patterns open, one entry per (process, node).
// Kernel threads and zombies are skipped, processes that vanish mid-scan are
// tolerated, and a process whose fds cannot be read (another user's, when not
// root) is not seen. No matching node means no holders.
func ScanDeviceHolders(patterns []string) ([]DeviceHolder, error) {
	nodes, err := ExpandDevices(patterns)
	if err != nil || len(nodes) == 0 {
		return nil, err
	}
	return scanHolders(nodes)
}

// scanHolders walks /proc once for the given nodes.
func scanHolders(nodes []DeviceNode) ([]DeviceHolder, error) {
	index := make(map[nodeKey]string, len(nodes))
	for _, n := range nodes {
		index[n.key] = n.Path
	}
	d, err := os.Open("/proc")
	if err != nil {
		return nil, fmt.Errorf("cannot scan for device holders: %v", err)
	}
	defer d.Close()
	self := os.Getpid()
	users := map[int]string{}
	var out []DeviceHolder
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
	sort.Slice(out, func(i, j int) bool {
		if out[i].PID != out[j].PID {
			return out[i].PID < out[j].PID
		}
		return out[i].Node < out[j].Node
	})
	return out, nil
}

// scanPID returns what process pid holds among the indexed nodes. Every read
// goes through a dirfd on /proc/PID, which stays bound to this process: a read
// through it that succeeds after ReadStat proves the start time read is this
// process's, even if the pid is reused later.
func scanPID(pid int, index map[nodeKey]string, users map[int]string) []DeviceHolder {
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
	byNode := map[string]*DeviceHolder{}
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
			h = &DeviceHolder{Ident: st.Ident, Node: node}
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
	out := make([]DeviceHolder, 0, len(order))
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

// addDRM adds the DRM memory fdinfo reports for the holder's fds, counting
// each DRM client once.
func addDRM(dirfd int, h *DeviceHolder) {
	clients := map[string]bool{}
	for _, fd := range h.FDs {
		b, err := readAt(dirfd, "fdinfo/"+strconv.Itoa(fd), 16384)
		if err != nil && len(b) == 0 {
			continue
		}
		info := parseFdinfoDRM(b)
		if info.driver != "" && h.DRMDriver == "" {
			h.DRMDriver = info.driver
		}
		if len(info.mem) == 0 {
			continue
		}
		if info.client != "" {
			if clients[info.client] {
				continue
			}
			clients[info.client] = true
		}
		if h.DRM == nil {
			h.DRM = map[string]uint64{}
		}
		for k, v := range info.mem {
			h.DRM[k] += v
		}
	}
}

// drmInfo is what fdinfo says about one DRM fd.
type drmInfo struct {
	driver, client string
	mem            map[string]uint64 // bytes, keys without "drm-"
}

// drmMemPrefixes are the fdinfo keys that carry memory use
// (Documentation/gpu/drm-usage-stats.rst).
var drmMemPrefixes = []string{"drm-memory-", "drm-total-", "drm-resident-"}

// parseFdinfoDRM parses the drm-* keys of one /proc/PID/fdinfo/FD text.
// Values are bytes with an optional KiB, MiB or GiB unit; malformed lines are
// skipped.
func parseFdinfoDRM(text []byte) drmInfo {
	var info drmInfo
	sc := bufio.NewScanner(bytes.NewReader(text))
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok || !strings.HasPrefix(key, "drm-") {
			continue
		}
		val = strings.TrimSpace(val)
		switch key {
		case "drm-driver":
			info.driver = val
			continue
		case "drm-client-id":
			info.client = val
			continue
		}
		for _, p := range drmMemPrefixes {
			if !strings.HasPrefix(key, p) || len(key) == len(p) {
				continue
			}
			n, ok := parseDRMSize(val)
			if !ok {
				break
			}
			if info.mem == nil {
				info.mem = map[string]uint64{}
			}
			info.mem[strings.TrimPrefix(key, "drm-")] += n
			break
		}
	}
	return info
}

// parseDRMSize parses "1376 KiB", "3 MiB" or "4096".
func parseDRMSize(s string) (uint64, bool) {
	num, unit, _ := strings.Cut(s, " ")
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil {
		return 0, false
	}
	switch strings.TrimSpace(unit) {
	case "":
		return n, true
	case "KiB":
		return n << 10, true
	case "MiB":
		return n << 20, true
	case "GiB":
		return n << 30, true
	}
	return 0, false
}

// Baseline is the set of device holders present before the hold was granted
// (system daemons, monitoring agents). They are not blamed on the payload.
// The zero value is an empty baseline.
type Baseline map[proc.Ident]struct{}

// NewBaseline records holders, by identity, as the baseline.
func NewBaseline(holders []DeviceHolder) Baseline {
	b := Baseline{}
	for _, h := range holders {
		b[h.Ident] = struct{}{}
	}
	return b
}

// Contains reports whether id was a holder before the grant.
func (b Baseline) Contains(id proc.Ident) bool {
	_, ok := b[id]
	return ok
}

// Filter returns the holders not in the baseline. A pid that was a baseline
// holder but now names another process (another start time) is kept.
func (b Baseline) Filter(holders []DeviceHolder) []DeviceHolder {
	var out []DeviceHolder
	for _, h := range holders {
		if !b.Contains(h.Ident) {
			out = append(out, h)
		}
	}
	return out
}

// Policy is what a hold does about device holders found after teardown.
// It implements pflag.Value, so it can be bound with Flags().Var.
type Policy string

const (
	// PolicyWarn reports the holders and releases (the default).
	PolicyWarn Policy = "warn"
	// PolicyWait waits up to a bound for the holders to go, then reports any left.
	PolicyWait Policy = "wait"
	// PolicyFail waits like PolicyWait; holders left make the hold exit
	// ExitDeviceHolders (73).
	PolicyFail Policy = "fail"
)

// ParsePolicy parses a --device-holders value.
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(s); p {
	case PolicyWarn, PolicyWait, PolicyFail:
		return p, nil
	case "":
		return PolicyWarn, nil
	}
	return "", fmt.Errorf("--device-holders %q is not one of warn, wait, fail", s)
}

func (p *Policy) String() string {
	if p == nil || *p == "" {
		return string(PolicyWarn)
	}
	return string(*p)
}

// Set parses s into p (pflag.Value).
func (p *Policy) Set(s string) error {
	v, err := ParsePolicy(s)
	if err != nil {
		return err
	}
	*p = v
	return nil
}

// Type names the flag's value type (pflag.Value).
func (p *Policy) Type() string { return "warn|wait|fail" }

// deviceRescan bounds how long WaitDeviceHolders waits between scans: a
// holder may close the node without exiting, which no pidfd tells.
var deviceRescan = 250 * time.Millisecond

// WaitDeviceHolders scans for holders of patterns outside baseline until
// none is left or bound has passed, and returns those left (nil when none).
// Between scans it waits on the holders' pidfds, rescanning as soon as one
// exits and at least every 250ms. A bound <= 0 scans once. When ctx ends it
// returns the holders of the last scan and ctx's error.
func WaitDeviceHolders(ctx context.Context, patterns []string, baseline Baseline, bound time.Duration) ([]DeviceHolder, error) {
	deadline := time.Now().Add(bound)
	for {
		hs, err := ScanDeviceHolders(patterns)
		if err != nil {
			return nil, err
		}
		hs = baseline.Filter(hs)
		if len(hs) == 0 {
			return nil, nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return hs, nil
		}
		if err := waitAnyExit(ctx, hs, min(left, deviceRescan)); err != nil {
			return hs, err
		}
	}
}

// waitAnyExit waits until one of the holders exits, timeout passes or ctx
// ends (its error is returned).
func waitAnyExit(ctx context.Context, hs []DeviceHolder, timeout time.Duration) error {
	var fds []unix.PollFd
	seen := map[proc.Ident]bool{}
	for _, h := range hs {
		if seen[h.Ident] {
			continue
		}
		seen[h.Ident] = true
		ph, err := proc.Open(h.Ident)
		if errors.Is(err, proc.ErrGone) {
			closeAll(fds)
			return ctx.Err() // one already left: rescan now
		}
		if err != nil {
			continue // cannot watch it; the rescan interval still covers it
		}
		fds = append(fds, unix.PollFd{Fd: int32(ph.FD), Events: unix.POLLIN})
	}
	defer closeAll(fds)
	_, err := proc.Poll(ctx, fds, timeout)
	return err
}

func closeAll(fds []unix.PollFd) {
	for _, p := range fds {
		unix.Close(int(p.Fd))
	}
}

// DeviceCheck is the outcome of the device-holder check after teardown.
type DeviceCheck struct {
	Policy   Policy         `json:"policy"`
	Patterns []string       `json:"patterns"`
	Holders  []DeviceHolder `json:"holders,omitempty"` // outside the baseline, still there at the end
	Waited   time.Duration  `json:"waited_ns"`
}

// ExitCode is ExitDeviceHolders when the policy is fail and holders are
// left, 0 otherwise (the hold's own code stands).
func (c DeviceCheck) ExitCode() int {
	if c.Policy == PolicyFail && len(c.Holders) > 0 {
		return ExitDeviceHolders
	}
	return 0
}

// CheckDeviceHolders runs the check under policy: warn scans once; wait and
// fail wait up to bound (WaitDeviceHolders) for the holders outside baseline
// to go. The holders left are in the result; ExitCode says what fail makes of
// them.
func CheckDeviceHolders(ctx context.Context, policy Policy, patterns []string, baseline Baseline, bound time.Duration) (DeviceCheck, error) {
	if policy == "" {
		policy = PolicyWarn
	}
	c := DeviceCheck{Policy: policy, Patterns: patterns}
	if policy == PolicyWarn {
		bound = 0
	}
	t0 := time.Now()
	hs, err := WaitDeviceHolders(ctx, patterns, baseline, bound)
	c.Holders, c.Waited = hs, time.Since(t0)
	return c, err
}
