// pin.go owns pinning: a hold pins its lineage (maps and links) under
// /sys/fs/bpf/gpu-hold/<hold id>/ so that tracking goes on after the holder
// process dies (pinned links keep the programs attached), and a successor
// opens the pins to read, seal and end a dead holder's lineage, then unpins.
package bpf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/proc"
)

// BPFFS is where the BPF filesystem is mounted; PinRoot holds one directory
// per pinned hold.
const (
	BPFFS   = "/sys/fs/bpf"
	PinRoot = BPFFS + "/gpu-hold"
)

// Pin file names inside a hold's pin directory.
var (
	pinMaps  = []string{lineageMapConfig, lineageMapState, lineageMapLineage, lineageMapEvents}
	pinLinks = []string{"link_exit", "link_exec", "link_fork"} // the order Load attaches them
)

// PinDir is the pin directory of a hold.
func PinDir(holdID string) string { return filepath.Join(PinRoot, holdID) }

// BPFFSMounted reports whether a BPF filesystem is mounted at BPFFS.
func BPFFSMounted() bool {
	var st unix.Statfs_t
	return unix.Statfs(BPFFS, &st) == nil && uint32(st.Type) == unix.BPF_FS_MAGIC
}

// mountBPFFS mounts the BPF filesystem at BPFFS unless one is there.
func mountBPFFS() error {
	if BPFFSMounted() {
		return nil
	}
	if err := unix.Mount("bpffs", BPFFS, "bpf", 0, ""); err != nil {
		return fmt.Errorf("mounting the BPF filesystem at %s: %w (mount it: mount -t bpf bpffs %s)", BPFFS, err, BPFFS)
	}
	return nil
}

func (l *Lineage) mapByName(name string) *ebpf.Map {
	switch name {
	case lineageMapConfig:
		return l.maps.Config
	case lineageMapState:
		return l.maps.State
	case lineageMapLineage:
		return l.maps.Lineage
	case lineageMapEvents:
		return l.maps.Events
	}
	return nil
}

func (l *Lineage) setMap(name string, m *ebpf.Map) {
	switch name {
	case lineageMapConfig:
		l.maps.Config = m
	case lineageMapState:
		l.maps.State = m
	case lineageMapLineage:
		l.maps.Lineage = m
	case lineageMapEvents:
		l.maps.Events = m
	}
}

// Pin pins the maps and links under PinDir(HoldID()), mounting the BPF
// filesystem first when it is not mounted, and returns the directory. From
// then on Close leaves the lineage tracking in the kernel; Unpin ends it.
func (l *Lineage) Pin() (string, error) {
	if l.holdID == "" {
		return "", errors.New("pinning a lineage needs a hold id")
	}
	if len(l.links) != len(pinLinks) {
		return "", errors.New("pinning a lineage that is not attached")
	}
	if err := mountBPFFS(); err != nil {
		return "", err
	}
	dir := PinDir(l.holdID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("creating pin directory: %w", err)
	}
	if err := pinHolderOf(dir); err != nil {
		return "", err
	}
	for _, name := range pinMaps {
		if err := l.mapByName(name).Pin(filepath.Join(dir, name)); err != nil {
			return "", fmt.Errorf("pinning map %s: %w", name, err)
		}
	}
	for i, name := range pinLinks {
		if err := l.links[i].Pin(filepath.Join(dir, name)); err != nil {
			return "", fmt.Errorf("pinning link %s: %w", name, err)
		}
	}
	return dir, nil
}

// OpenPinned opens the lineage a (possibly dead) holder pinned under
// PinDir(holdID): its maps, to read the members, seal and read events, and
// its links, so that Unpin can detach them. It loads no programs.
func OpenPinned(holdID string) (_ *Lineage, err error) {
	if !validHoldID(holdID) {
		return nil, fmt.Errorf("hold id %q: use letters, digits, '.', '_' and '-' only", holdID)
	}
	dir := PinDir(holdID)
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("no pinned lineage for hold %s: %w", holdID, err)
	}
	l := &Lineage{holdID: holdID, id: HashHoldID(holdID)}
	defer func() {
		if err != nil {
			l.Close()
		}
	}()
	if err := l.openPinnedMaps(dir, "pinned"); err != nil {
		return nil, err
	}
	for _, name := range pinLinks {
		lk, err := link.LoadPinnedLink(filepath.Join(dir, name), nil)
		if err != nil {
			return nil, fmt.Errorf("opening pinned link %s: %w", name, err)
		}
		l.links = append(l.links, lk)
	}
	return l, nil
}

// openPinnedMaps opens the lineage's maps pinned in dir (what: "pinned" or
// "spare", for the error).
func (l *Lineage) openPinnedMaps(dir, what string) error {
	for _, name := range pinMaps {
		m, err := ebpf.LoadPinnedMap(filepath.Join(dir, name), nil)
		if err != nil {
			return fmt.Errorf("opening %s map %s: %w", what, name, err)
		}
		l.setMap(name, m)
	}
	return nil
}

// Unpin removes the pins and the directory. The objects are freed when the
// last descriptor (this Lineage's, after Close) goes.
func (l *Lineage) Unpin() error {
	if l.holdID == "" {
		return nil
	}
	var errs []error
	for _, lk := range l.links {
		errs = append(errs, lk.Unpin())
	}
	for _, name := range pinMaps {
		if m := l.mapByName(name); m != nil {
			errs = append(errs, m.Unpin())
		}
	}
	dir := PinDir(l.holdID)
	// Pins this process did not open (a half-written pin directory).
	for _, name := range append(append([]string{pinHolder}, pinMaps...), pinLinks...) {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// PinnedHolds lists the hold ids with a pinned lineage.
func PinnedHolds() ([]string, error) {
	ents, err := os.ReadDir(PinRoot)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range ents {
		if e.IsDir() && validHoldID(e.Name()) {
			ids = append(ids, e.Name())
		}
	}
	return ids, nil
}

// pinHolder is the pin of a one-entry map that names the process that
// pinned the lineage, by pid and start time: a hold id is written in
// tickets anyone can forge, so a successor ends a pinned lineage only for
// the ticket whose holder pinned it (see PinnedHolder).
const pinHolder = "holder"

// pinHolderOf pins, in dir, the map that names this process as the holder.
func pinHolderOf(dir string) error {
	self, err := proc.Self()
	if err != nil {
		return fmt.Errorf("reading own identity for the pin: %w", err)
	}
	m, err := ebpf.NewMap(&ebpf.MapSpec{Name: "holder", Type: ebpf.Array, KeySize: 4, ValueSize: 16, MaxEntries: 1})
	if err != nil {
		return fmt.Errorf("creating the pin's holder map: %w", err)
	}
	defer m.Close() // the pin keeps it
	var v [16]byte
	binary.LittleEndian.PutUint64(v[:8], uint64(self.PID))
	binary.LittleEndian.PutUint64(v[8:], self.Start)
	if err := m.Put(uint32(0), v[:]); err != nil {
		return fmt.Errorf("writing the pin's holder map: %w", err)
	}
	if err := m.Pin(filepath.Join(dir, pinHolder)); err != nil {
		return fmt.Errorf("pinning the holder map: %w", err)
	}
	return nil
}

// PinnedHolder returns the process that pinned holdID's lineage.
func PinnedHolder(holdID string) (proc.Ident, error) {
	if !validHoldID(holdID) {
		return proc.Ident{}, fmt.Errorf("hold id %q: use letters, digits, '.', '_' and '-' only", holdID)
	}
	m, err := ebpf.LoadPinnedMap(filepath.Join(PinDir(holdID), pinHolder), nil)
	if err != nil {
		return proc.Ident{}, fmt.Errorf("no holder pinned for hold %s: %w", holdID, err)
	}
	defer m.Close()
	var v [16]byte
	if err := m.Lookup(uint32(0), v[:]); err != nil {
		return proc.Ident{}, fmt.Errorf("reading the holder pinned for hold %s: %w", holdID, err)
	}
	return proc.Ident{PID: int(binary.LittleEndian.Uint64(v[:8])), Start: binary.LittleEndian.Uint64(v[8:])}, nil
}
