// guard.go owns the guard's device filter (guard.bpf.c): loading it,
// attaching it to the root of the cgroup v2 hierarchy through a BPF link
// (closed, and so detached, when the guard exits in any way: fail-open),
// filling its maps, and reading its denials.
package bpf

//go:generate go tool bpf2go -tags linux -target bpfel -cflags "-O2 -g -Wall -Werror -mcpu=v3" -type dev_key -type denial -type exe_key guard guard.bpf.c -- -I/usr/include/x86_64-linux-gnu -I/usr/include/aarch64-linux-gnu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"
)

// Denial is one open the filter refused.
type Denial struct {
	TGID, UID uint32
	Dev       DevID
	Access    uint32 // BPF_DEVCG_ACC_* bits: 1 mknod, 2 read, 4 write
}

// DeviceGuard is the loaded and attached filter.
type DeviceGuard struct {
	objs guardObjects
	lnk  link.Link
	rd   *ringbuf.Reader
	rec  ringbuf.Record
}

// LoadDeviceGuard loads the filter and attaches it to the cgroup v2
// hierarchy's root, mount (for example /sys/fs/cgroup/unified).
func LoadDeviceGuard(mount string) (_ *DeviceGuard, err error) {
	g := &DeviceGuard{}
	if err := loadGuardObjects(&g.objs, nil); err != nil {
		return nil, fmt.Errorf("loading the guard's device filter: %w", err)
	}
	defer func() {
		if err != nil {
			g.Close()
		}
	}()
	// A link, not a plain attach: the program goes with the guard's fd.
	g.lnk, err = link.AttachCgroup(link.CgroupOptions{Path: mount, Attach: ebpf.AttachCGroupDevice, Program: g.objs.GuardDev})
	if err != nil {
		return nil, fmt.Errorf("attaching the guard's device filter to %s: %w", mount, err)
	}
	if g.rd, err = ringbuf.NewReader(g.objs.Denials); err != nil {
		return nil, fmt.Errorf("reading the guard's denials: %w", err)
	}
	return g, nil
}

// Close detaches the filter (every open is allowed again) and frees it.
func (g *DeviceGuard) Close() error {
	if g.rd != nil {
		g.rd.Close()
	}
	var err error
	if g.lnk != nil {
		err = g.lnk.Close()
	}
	return errors.Join(err, g.objs.Close())
}

// SetDevices makes devs the guarded nodes.
func (g *DeviceGuard) SetDevices(devs []DevID) error {
	want := map[guardDevKey]bool{}
	for _, d := range devs {
		want[guardDevKey{Type: d.Type, Major: d.Major, Minor: d.Minor}] = true
	}
	return syncSet(g.objs.Guarded, want)
}

// SetTGIDs makes tgids the processes allowed by pid.
func (g *DeviceGuard) SetTGIDs(tgids map[uint32]bool) error { return syncSet(g.objs.Tgids, tgids) }

// SetHolders makes holders (tgid -> start time in clock ticks, as
// /proc/PID/stat field 22) the holders' processes: they and every process
// below them are allowed.
func (g *DeviceGuard) SetHolders(holders map[uint32]uint64) error {
	var k uint32
	var v uint64
	var stale []uint32
	it := g.objs.Holders.Iterate()
	for it.Next(&k, &v) {
		if _, ok := holders[k]; !ok {
			stale = append(stale, k)
		}
	}
	if err := it.Err(); err != nil {
		return err
	}
	for _, s := range stale {
		if err := g.objs.Holders.Delete(s); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return err
		}
	}
	for k, v := range holders {
		if err := g.objs.Holders.Put(k, v); err != nil {
			return err
		}
	}
	return nil
}

// SetLaunchers names the gpu-hold executables (by path): every process
// below one that runs one of them is allowed.
func (g *DeviceGuard) SetLaunchers(paths []string) error {
	want := map[guardExeKey]bool{}
	for _, p := range paths {
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			return fmt.Errorf("the gpu-hold executable %s: %w", p, err)
		}
		// The kernel's own dev_t encoding: 12 bits of major above 20 of minor.
		kdev := unix.Major(st.Dev)<<20 | unix.Minor(st.Dev)
		want[guardExeKey{Ino: st.Ino, Dev: kdev}] = true
	}
	return syncSet(g.objs.Launchers, want)
}

// SetUIDs makes uids the users allowed.
func (g *DeviceGuard) SetUIDs(uids map[uint32]bool) error { return syncSet(g.objs.Uids, uids) }

// SetCgroups makes ids the cgroups (by id: the cgroup2 directory's inode)
// whose members are allowed.
func (g *DeviceGuard) SetCgroups(ids map[uint64]bool) error { return syncSet(g.objs.Cgroups, ids) }

// LineageSlots is how many pinned lineages the filter holds at once
// (LINEAGE_SLOTS in guard.bpf.c): one per guarded resource.
const LineageSlots = 8

// SetLineage puts the pinned lineage map of hold holdID in slot (""
// clears it). Its members, newborns included, are allowed.
func (g *DeviceGuard) SetLineage(slot int, holdID string) error {
	if slot < 0 || slot >= LineageSlots {
		return fmt.Errorf("lineage slot %d: the filter has %d", slot, LineageSlots)
	}
	key := uint32(slot)
	if holdID == "" {
		err := g.objs.Lineage.Delete(key)
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil
		}
		return err
	}
	if !validHoldID(holdID) {
		return fmt.Errorf("hold id %q: use letters, digits, '.', '_' and '-' only", holdID)
	}
	m, err := ebpf.LoadPinnedMap(filepath.Join(PinDir(holdID), lineageMapLineage), &ebpf.LoadPinOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("opening hold %s's pinned lineage: %w", holdID, err)
	}
	defer m.Close()
	return g.objs.Lineage.Put(key, m)
}

// ReadDenial waits for the next denial; it fails once Close was called.
// It is not safe for concurrent use (one reader, one record buffer).
func (g *DeviceGuard) ReadDenial() (Denial, error) {
	if err := g.rd.ReadInto(&g.rec); err != nil {
		if errors.Is(err, os.ErrClosed) {
			return Denial{}, err
		}
		return Denial{}, fmt.Errorf("reading a denial: %w", err)
	}
	b := g.rec.RawSample
	if len(b) < 24 {
		return Denial{}, fmt.Errorf("a denial of %d bytes, want 24", len(b))
	}
	u := func(i int) uint32 { return binary.LittleEndian.Uint32(b[4*i:]) }
	return Denial{TGID: u(0), UID: u(1), Dev: DevID{u(2), u(3), u(4)}, Access: u(5)}, nil
}

// Refused is how many opens the filter refused since it was loaded (each
// process is streamed to ReadDenial at most once a second).
func (g *DeviceGuard) Refused() (uint64, error) {
	var per []uint64
	if err := g.objs.Refused.Lookup(uint32(0), &per); err != nil {
		return 0, err
	}
	var n uint64
	for _, v := range per {
		n += v
	}
	return n, nil
}

// syncSet makes the keys of hash map m exactly want (value 1).
func syncSet[K comparable](m *ebpf.Map, want map[K]bool) error {
	var k K
	var v uint8
	var stale []K
	it := m.Iterate()
	for it.Next(&k, &v) {
		if !want[k] {
			stale = append(stale, k)
		}
	}
	if err := it.Err(); err != nil {
		return err
	}
	for _, s := range stale {
		if err := m.Delete(s); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return err
		}
	}
	one := uint8(1)
	for w := range want {
		if err := m.Put(w, one); err != nil {
			return err
		}
	}
	return nil
}
