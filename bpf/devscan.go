// devscan.go owns the kernel's side of the device-holder check:
// devscan.bpf.c, an iter/task_file program that reports only the open files
// whose inode is one of a set of device nodes, and FindDeviceFiles, which
// loads it (or opens the host's pinned copy), runs it once and reads its
// records. One read of the iterator
// replaces a readdir of every /proc/PID/fd and a stat of every fd on the host.
package bpf

//go:generate go tool bpf2go -tags linux -target bpfel -cflags "-O2 -g -Wall -Werror -mcpu=v3" -type dev_match -type dev_key devscan devscan.bpf.c -- -I/usr/include/x86_64-linux-gnu -I/usr/include/aarch64-linux-gnu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// Dev is a device node's identity: its kind and the device number it
// stands for.
type Dev struct {
	Block        bool // a block device; else a character device
	Major, Minor uint32
}

// DevFile is one open file of one of the devices.
type DevFile struct {
	PID     int    // tgid whose fd table has the file
	TID     int    // the task the iterator saw it through (the leader, or a thread with a table of its own, or the live thread of a zombie leader)
	FD      int    // the fd it is open as
	StartNs uint64 // the task's start_boottime: NsToTicks gives /proc's field 22
	Dev     Dev
}

// MaxDevs is how many devices one FindDeviceFiles call can look for
// (max_entries of the targets map).
const MaxDevs = 4096

const (
	devKindChar  = 1
	devKindBlock = 2
)

// kernelDev encodes major and minor as the kernel's dev_t (MKDEV).
func kernelDev(d Dev) uint32 { return d.Major<<20 | d.Minor&0xfffff }

// devscanObjs is the loaded program and map, kept for the life of the process:
// a hold checks its devices at least twice (before its payload and after
// its teardown), and the load is the costly part.
type devscanObjs struct {
	mu       sync.Mutex
	objs     *devscanObjects
	shared   bool // the host's pinned copy (devscan_pin.go): targets are added, never cleared
	noPinned bool // tests: load this process's own copy
	err      error
}

var devscanLoaded devscanObjs

// load loads the program once per process; a failure is remembered.
func (d *devscanObjs) load() (*devscanObjects, error) {
	if d.objs != nil || d.err != nil {
		return d.objs, d.err
	}
	if objs, err := openPinnedDevscan(); err == nil && !d.noPinned {
		d.objs, d.shared = objs, true
		return d.objs, nil
	}
	spec, err := loadDevscan()
	if err != nil {
		d.err = fmt.Errorf("reading the embedded device-scan BPF object: %w", err)
		return nil, d.err
	}
	var objs devscanObjects
	if err := spec.LoadAndAssign(&objs, loadOptions()); err != nil {
		d.err = fmt.Errorf("loading the device-scan BPF iterator: %w", loadError(err))
		return nil, d.err
	}
	d.objs = &objs
	return d.objs, nil
}

// FindDeviceFiles returns every open file on the host, in any process's fd
// table, that is one of devs. An error means the kernel could not answer
// (no BPF, no iterators, not permitted): the caller scans /proc instead.
func FindDeviceFiles(devs []Dev) ([]DevFile, error) {
	if len(devs) > MaxDevs {
		return nil, fmt.Errorf("%d device nodes to look for, more than the %d the BPF device scan takes", len(devs), MaxDevs)
	}
	devscanLoaded.mu.Lock()
	defer devscanLoaded.mu.Unlock()
	objs, err := devscanLoaded.load()
	if err != nil {
		return nil, err
	}
	if devscanLoaded.shared {
		if err := addTargets(objs.Targets, devs); err != nil {
			return nil, err
		}
		files, err := runDevscan(objs.FindDeviceFiles)
		return onlyDevs(files, devs), err
	}
	if err := setTargets(objs.Targets, devs); err != nil {
		return nil, err
	}
	return runDevscan(objs.FindDeviceFiles)
}

// devKey is d as the targets map keys it.
func devKey(d Dev) devscanDevKey {
	k := devscanDevKey{Kind: devKindChar, Rdev: kernelDev(d)}
	if d.Block {
		k.Kind = devKindBlock
	}
	return k
}

// setTargets makes the targets map hold exactly devs.
func setTargets(m *ebpf.Map, devs []Dev) error {
	want := make(map[devscanDevKey]bool, len(devs))
	for _, d := range devs {
		want[devKey(d)] = true
	}
	var stale []devscanDevKey
	var k devscanDevKey
	var v uint8
	it := m.Iterate()
	for it.Next(&k, &v) {
		if !want[k] {
			stale = append(stale, k)
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("reading the device-scan targets map: %w", err)
	}
	for _, k := range stale {
		if err := m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("clearing the device-scan targets map: %w", err)
		}
	}
	for k := range want {
		if err := m.Put(k, uint8(1)); err != nil {
			return fmt.Errorf("filling the device-scan targets map: %w", err)
		}
	}
	return nil
}

var devMatchSize = int(unsafe.Sizeof(devscanDevMatch{}))

// runDevscan runs the iterator and decodes its records.
func runDevscan(prog *ebpf.Program) ([]DevFile, error) {
	raw, err := runIter(prog, "device-scan")
	if err != nil {
		return nil, err
	}
	if len(raw)%devMatchSize != 0 {
		return nil, fmt.Errorf("the device-scan BPF iterator wrote %d bytes, not a whole number of %d-byte records", len(raw), devMatchSize)
	}
	out := make([]DevFile, 0, len(raw)/devMatchSize)
	for off := 0; off < len(raw); off += devMatchSize {
		out = append(out, decodeDevMatch(raw[off:off+devMatchSize]))
	}
	return out, nil
}

// runIter attaches an iterator program, reads it to the end and detaches
// it; what names it in errors.
func runIter(prog *ebpf.Program, what string) ([]byte, error) {
	lk, err := link.AttachIter(link.IterOptions{Program: prog})
	if err != nil {
		return nil, fmt.Errorf("attaching the %s BPF iterator: %w", what, err)
	}
	return readLink(lk, what)
}

// readLink runs an attached iterator once, reads all it writes, and
// closes the link.
func readLink(lk *link.Iter, what string) ([]byte, error) {
	defer lk.Close()
	rd, err := lk.Open()
	if err != nil {
		return nil, fmt.Errorf("opening the %s BPF iterator: %w", what, err)
	}
	defer rd.Close()
	raw, err := readIter(rd)
	if err != nil {
		return nil, fmt.Errorf("reading the %s BPF iterator: %w", what, err)
	}
	return raw, nil
}

// readIter reads an iterator to its end. A read that visits a million
// objects without writing anything (a host with more open files than that,
// none of them a target) returns EAGAIN, and the next read goes on from
// where it stopped.
func readIter(rd io.Reader) ([]byte, error) {
	var out []byte
	buf := make([]byte, 64<<10)
	for {
		n, err := rd.Read(buf)
		out = append(out, buf[:n]...)
		switch {
		case errors.Is(err, io.EOF) || err == nil && n == 0:
			return out, nil
		case errors.Is(err, unix.EAGAIN):
			continue
		case err != nil:
			return out, err
		}
	}
}

// decodeDevMatch decodes one record (host byte order).
func decodeDevMatch(b []byte) DevFile {
	var m devscanDevMatch
	m.Tgid = binary.NativeEndian.Uint32(b[unsafe.Offsetof(m.Tgid):])
	m.Tid = binary.NativeEndian.Uint32(b[unsafe.Offsetof(m.Tid):])
	m.Fd = binary.NativeEndian.Uint32(b[unsafe.Offsetof(m.Fd):])
	m.Kind = binary.NativeEndian.Uint32(b[unsafe.Offsetof(m.Kind):])
	m.Rdev = binary.NativeEndian.Uint32(b[unsafe.Offsetof(m.Rdev):])
	m.StartNs = binary.NativeEndian.Uint64(b[unsafe.Offsetof(m.StartNs):])
	return DevFile{
		PID: int(m.Tgid), TID: int(m.Tid), FD: int(m.Fd), StartNs: m.StartNs,
		Dev: Dev{Block: m.Kind == devKindBlock, Major: m.Rdev >> 20, Minor: m.Rdev & 0xfffff},
	}
}
