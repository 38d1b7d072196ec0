// kernel.go owns --deny-at-open: the guard's device filter (bpf/guard.bpf.c)
// attached to the root of the cgroup v2 hierarchy, so that a process
// outside every holder's lineage and the allow-list gets EPERM when it
// opens a guarded node, before it takes any device memory. What descends
// from a process running the gpu-hold executable (the guard's own) is let
// through from its first instruction, so no hold's payload ever waits for
// the guard to have seen its ticket; the scan still names (and ends) one
// that is not its resource's holder's. The guard keeps the filter's sets
// in step with the queue: after every scan, and at once when a resource's
// queue directory changes (inotify), then every fastRefresh for fastFor,
// while a new holder's pin and cgroup appear.
// Refusals are counted in the kernel; each refused process is streamed to
// the guard at most once a second, and logged and audited once a minute.
// The filter goes with the guard's process (a BPF link): fail-open.
package guard

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/bpf"
	"github.com/gpu-hold/gpu-hold/internal/cgroup"
	"github.com/gpu-hold/gpu-hold/internal/device"
	"github.com/gpu-hold/gpu-hold/internal/proc"
)

const (
	fastRefresh = 5 * time.Millisecond
	fastFor     = 2 * time.Second
	denialQuiet = time.Minute // one log line per refused process in this long
)

// kernel is the attached filter and what the guard knows of it.
type kernel struct {
	dg      *bpf.DeviceGuard
	mount   string
	mu      sync.Mutex // refresh
	nodes   map[bpf.DevID]nodeOf
	logged  map[uint32]time.Time
	in      int // inotify on the resource dirs; -1: none
	watched map[string]bool
	holders map[uint32]uint64  // the last set, for the log
	noSlot  map[string]bool    // holds whose lineage the filter refused, logged once
	stop    context.CancelFunc // ends followQueues
	done    chan struct{}      // closed when followQueues returned
	// launchers is the gpu-hold executable (the guard's own): a hold's
	// payload is let through from its start, before the guard saw the hold.
	launchers []string
}

// nodeOf names a guarded device.
type nodeOf struct{ resource, path string }

// openKernel loads and attaches the filter, fills it, and starts its
// readers. It fails (no silent fallback) where BPF or cgroup v2 is missing.
func (g *Guard) openKernel(ctx context.Context) error {
	mnt := cgroup.Mount()
	if mnt == "" {
		return fmt.Errorf("--deny-at-open needs a cgroup v2 mount: mount cgroup2, or run the guard without it (it then ends intruders after the fact)")
	}
	dg, err := bpf.LoadDeviceGuard(mnt)
	if err != nil {
		return fmt.Errorf("--deny-at-open: %v (run as root on a kernel with BPF; or drop --deny-at-open)", err)
	}
	k := &kernel{dg: dg, mount: mnt, nodes: map[bpf.DevID]nodeOf{}, logged: map[uint32]time.Time{}, watched: map[string]bool{}}
	k.in, err = unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		k.in = -1
		g.o.Log.Warn().Err(err).Msg("cannot watch the queue with inotify: the filter follows a new holder at the next scan only")
	}
	if exe, err := os.Executable(); err == nil {
		k.launchers = []string{exe}
	}
	g.kern = k
	if k.in >= 0 {
		// A resource dir made by the first hold on it: watched once it exists.
		unix.InotifyAddWatch(k.in, g.o.Dir, unix.IN_CREATE|unix.IN_MOVED_TO|unix.IN_ONLYDIR)
	}
	g.refreshKernel()
	kctx, stop := context.WithCancel(ctx)
	k.stop, k.done = stop, make(chan struct{})
	go g.readDenials()
	go g.followQueues(kctx)
	g.o.Log.Info().Str("cgroup_root", mnt).Msg("device filter attached: guarded nodes open only for the token holders' lineage and the allow-list (detached when the guard exits)")
	return nil
}

// closeKernel detaches the filter.
func (g *Guard) closeKernel() {
	if g.kern == nil {
		return
	}
	g.kern.stop()
	<-g.kern.done
	g.kern.dg.Close()
	if g.kern.in >= 0 {
		unix.Close(g.kern.in)
	}
}

// refreshKernel puts the guarded nodes and the allowed processes in the
// filter: per resource its holder's gpu-hold process (by tgid and start
// time: the filter lets through whatever descends from it, a payload from
// its first instruction), its pinned lineage (members that left the
// holder's tree) and its cgroup, and the allow-list (uids directly,
// executables by a walk of /proc at each refresh).
func (g *Guard) refreshKernel() {
	k := g.kern
	k.mu.Lock()
	defer k.mu.Unlock()
	devs, nodes := guardedDevs(g.res)
	k.nodes = nodes
	tgids, cgs, holders := map[uint32]bool{}, map[uint64]bool{}, map[uint32]uint64{}
	slot := 0
	for _, r := range g.res {
		for _, name := range g.queueNames[r.Name] {
			g.watchQueue(name)
		}
		set := g.lineageNow(r.Name)
		set.close() // the filter opens the pins itself
		for _, ln := range set {
			holders[uint32(ln.holder.PID)] = ln.holder.Start
			if slot < bpf.LineageSlots {
				if err := k.dg.SetLineage(slot, ln.holdID); err == nil {
					slot++
				} else if !k.noSlot[ln.holdID] {
					if k.noSlot == nil {
						k.noSlot = map[string]bool{}
					}
					k.noSlot[ln.holdID] = true
					g.o.Log.Warn().Err(err).Str("hold", ln.holdID).Msg("cannot give the device filter this hold's lineage: its members are let through only below the holder or in its cgroup")
				}
			}
			if cg := ln.cgroup(); cg != "" {
				if fi, err := os.Stat(filepath.Join(k.mount, cg)); err == nil {
					cgs[fi.Sys().(*syscall.Stat_t).Ino] = true
				}
			}
		}
	}
	for ; slot < bpf.LineageSlots; slot++ {
		k.dg.SetLineage(slot, "")
	}
	if g.o.Allow.hasExe() {
		g.walkAllowed(tgids)
	}
	if !maps.Equal(holders, k.holders) {
		g.o.Log.Info().Interface("holders", holders).Msg("device filter follows the token holders")
		k.holders = holders
	}
	for _, err := range []error{k.dg.SetDevices(devs), k.dg.SetLaunchers(k.launchers), k.dg.SetHolders(holders), k.dg.SetTGIDs(tgids), k.dg.SetCgroups(cgs), k.dg.SetUIDs(g.o.Allow.uidOnly())} {
		if err != nil {
			g.o.Log.Error().Err(err).Msg("cannot update the device filter; it keeps its last sets")
		}
	}
}

// walkAllowed adds to tgids the processes whose executable is
// allow-listed, from one walk of /proc.
func (g *Guard) walkAllowed(tgids map[uint32]bool) {
	snap, err := proc.TakeSnapshot()
	if err != nil {
		g.o.Log.Warn().Err(err).Msg("cannot walk /proc for the filter's allow-listed processes")
		return
	}
	for _, st := range snap.ByPID {
		if !st.Dead() && g.o.Allow.allowsExe(st.Ident, proc.UID(st.PID)) {
			tgids[uint32(st.PID)] = true
		}
	}
}

// guardedDevs is the device numbers of the resources' nodes.
func guardedDevs(res []device.Resource) ([]bpf.DevID, map[bpf.DevID]nodeOf) {
	var devs []bpf.DevID
	nodes := map[bpf.DevID]nodeOf{}
	for _, r := range res {
		ns, err := device.Expand(r.Devices)
		if err != nil {
			continue
		}
		for _, n := range ns {
			d, ok := devOf(n)
			if !ok {
				continue
			}
			if _, dup := nodes[d]; !dup {
				devs = append(devs, d)
				nodes[d] = nodeOf{r.Name, n.Path}
			}
		}
	}
	return devs, nodes
}

// devOf is a device node's number for the filter (not for a plain file).
func devOf(n device.Node) (bpf.DevID, bool) {
	typ := uint32(bpf.DevChar)
	switch n.Kind {
	case "char":
	case "block":
		typ = bpf.DevBlock
	default:
		return bpf.DevID{}, false
	}
	maj, min, ok := strings.Cut(n.Rdev, ":")
	a, err1 := strconv.ParseUint(maj, 10, 32)
	b, err2 := strconv.ParseUint(min, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return bpf.DevID{}, false
	}
	return bpf.DevID{Type: typ, Major: uint32(a), Minor: uint32(b)}, true
}

// watchQueue adds an inotify watch on resource's queue dir when it exists.
func (g *Guard) watchQueue(resource string) {
	k := g.kern
	if k.in < 0 || k.watched[resource] {
		return
	}
	if _, err := unix.InotifyAddWatch(k.in, filepath.Join(g.o.Dir, resource), unix.IN_CREATE|unix.IN_MOVED_TO|unix.IN_DELETE|unix.IN_MOVED_FROM|unix.IN_ONLYDIR); err == nil {
		k.watched[resource] = true
	}
}

// followQueues refreshes the filter when a queue dir changes, then fast
// for a while: a new holder pins its lineage and makes its cgroup just
// after it took the token, before its payload starts.
func (g *Guard) followQueues(ctx context.Context) {
	k := g.kern
	defer close(k.done)
	if k.in < 0 {
		return
	}
	buf := make([]byte, 64<<10)
	var fastUntil time.Time
	for ctx.Err() == nil {
		timeout := 200
		if time.Now().Before(fastUntil) {
			timeout = int(fastRefresh / time.Millisecond)
		}
		fds := []unix.PollFd{{Fd: int32(k.in), Events: unix.POLLIN}}
		n, _ := unix.Poll(fds, timeout)
		if n > 0 {
			for {
				if m, err := unix.Read(k.in, buf); err != nil || m <= 0 {
					break
				}
			}
			fastUntil = time.Now().Add(fastFor)
		}
		if n > 0 || time.Now().Before(fastUntil) {
			g.refreshKernel()
		}
	}
}

// readDenials logs, audits and counts the filter's refusals until it is
// closed.
func (g *Guard) readDenials() {
	k := g.kern
	for {
		d, err := k.dg.ReadDenial()
		if err != nil {
			return
		}
		k.mu.Lock()
		node := k.nodes[d.Dev]
		quiet := time.Since(k.logged[d.TGID]) < denialQuiet
		if !quiet {
			k.logged[d.TGID] = time.Now()
		}
		k.mu.Unlock()
		if quiet {
			continue
		}
		in := intruder{Resource: node.resource}
		in.PID, in.UID, in.Node = int(d.TGID), int(d.UID), node.path
		if st, err := proc.ReadStat(int(d.TGID)); err == nil {
			in.Start, in.Command = st.Start, strings.Join(proc.Cmdline(st.PID, 16, 256), " ")
			in.Exe = exeOf(st.Ident)
		}
		g.o.Log.Warn().Str("resource", node.resource).Str("node", node.path).Int("pid", in.PID).Uint64("start", in.Start).Int("uid", in.UID).
			Str("command", in.Command).Uint32("access", d.Access).Msg("denied at open: a process without the token tried to open the device")
		g.record(auditEntry{Action: "denied", Resource: node.resource, Node: node.path, Proc: in, Reason: "refused at open by the device filter"})
	}
}
