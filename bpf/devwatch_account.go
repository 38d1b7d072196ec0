// devwatch_account.go owns what the device watch answers: the open files of
// a set of devices, read from the openers' fd tables alone when the kernel's
// own reference counts show that no one else has one, else from every fd
// table on the host (a seed, which also teaches the watch what it found).
//
// The account holds when, for every file of a watched device that an opener
// has open, the file's reference count is the openers' fd slots and
// mappings of it (no process outside them shares it: a fork, SCM_RIGHTS,
// pidfd_getfd, an io_uring table all count), and when, for every dentry a
// watched device was opened through, its count is the files the openers
// have open through it plus what the last seed found structural (mounts):
// a file opened with O_PATH, which the open hook does not see, counts
// there. Anything else, or a map that overflowed, is a seed.
package bpf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/proc"
)

// WatchAnswer says how Watch.Find answered.
type WatchAnswer struct {
	Seeded   bool   // every fd table on the host was read
	Why      string // why the openers' account did not hold ("" when it was not tried)
	Openers  int    // live openers read
	InFlight int    // references credited to openers' sleeping calls (devwatch_inflight.go)
}

// Find returns every open file of devs on the host, as FindDeviceFiles
// does. paths are the device nodes the caller checks: their dentries are
// counted too. The fd tables read are only the openers', unless the
// account does not hold (WatchAnswer says why).
func (w *Watch) Find(devs []Dev, paths []string) ([]DevFile, WatchAnswer, error) {
	unlock, err := w.lock()
	if err != nil {
		return nil, WatchAnswer{}, err
	}
	defer unlock()
	self, err := openPaths(paths)
	defer closeFDs(self)
	if err != nil {
		return nil, WatchAnswer{}, err
	}
	var ans WatchAnswer
	if ans.Why, err = w.untrusted(devs); err != nil {
		return nil, ans, err
	}
	if ans.Why == "" {
		var files []fileRec
		files, ans, err = w.account(newDevSet(devs))
		if err != nil || ans.Why == "" {
			return onlyDevs(devFiles(files), devs), ans, err
		}
	}
	ans.Seeded = true
	files, err := w.seed()
	return onlyDevs(devFiles(files), devs), ans, err
}

// openPaths opens each node with O_PATH: this process's own files then
// name the dentries the caller checks. A symlink is followed to its node
// (an O_PATH open reads, writes and waits for nothing).
func openPaths(paths []string) ([]int, error) {
	var fds []int
	for _, p := range paths {
		fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return fds, fmt.Errorf("opening device node %s: %w", p, err)
		}
		fds = append(fds, fd)
	}
	return fds, nil
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// untrusted adds devs to the watched devices and says why the openers'
// account cannot answer for them ("" when it can): a device newly watched,
// or not seeded since, or a map that lost an entry since the last seed.
func (w *Watch) untrusted(devs []Dev) (string, error) {
	why := ""
	for _, d := range devs {
		k := devwatchDevKey{Kind: devKey(d).Kind, Rdev: devKey(d).Rdev}
		var v uint8
		err := w.objs.Watched.Lookup(k, &v)
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			err = w.objs.Watched.Update(k, uint8(0), ebpf.UpdateNoExist)
			if errors.Is(err, ebpf.ErrKeyExist) {
				err = nil
			}
		}
		if err != nil {
			return "", fmt.Errorf("adding device %d:%d to the device watch: %w", d.Major, d.Minor, err)
		}
		if v == 0 && why == "" {
			why = fmt.Sprintf("device %d:%d is newly watched", d.Major, d.Minor)
		}
	}
	if why != "" {
		return why, nil
	}
	return w.lost()
}

// lost says whether a map lost an entry since the last seed.
func (w *Watch) lost() (string, error) {
	now, seen, err := w.states()
	if err != nil {
		return "", err
	}
	if now.LostOpeners != seen.LostOpeners || now.LostDentries != seen.LostDentries {
		return fmt.Sprintf("the watch's maps were full (%d openers and %d nodes lost since the last seed)", now.LostOpeners-seen.LostOpeners, now.LostDentries-seen.LostDentries), nil
	}
	return "", nil
}

// states reads the programs' counters and what the last seed saw of them.
func (w *Watch) states() (now, seen devwatchWatchState, err error) {
	if err = w.objs.State.Lookup(uint32(0), &now); err == nil {
		err = w.objs.State.Lookup(uint32(1), &seen)
	}
	if err != nil {
		err = fmt.Errorf("reading the device watch's counters: %w", err)
	}
	return now, seen, err
}

type (
	fileRec   = devwatchFileRec
	vmaRec    = devwatchVmaRec
	dentryRec = devwatchDentryRec
)

// view is one read of the account: this process's files (the checked
// nodes), the openers' files and mappings, and the tracked dentries.
type view struct {
	files    []fileRec
	vmas     []vmaRec
	dentries []dentryRec
}

// account reads the openers twice and checks the reads agree and hold for
// devs. Between the reads it reads the sleeping threads of the openers
// whose files count more references than their slots and mappings, so
// that a call that ends or begins meanwhile shows as a change. It returns
// the openers' files, and in ans how many live openers it read, the
// references it credited to sleeping calls, and why the account does not
// hold ("" when it does).
func (w *Watch) account(devs devSet) (files []fileRec, ans WatchAnswer, err error) {
	openers, err := w.liveOpeners()
	defer closeHandles(openers)
	ans.Openers = len(openers)
	if err != nil {
		return nil, ans, err
	}
	first, err := w.read(openers)
	if err != nil {
		return nil, ans, err
	}
	credit, err := w.credits(openers, first, first.excess(devs))
	if err != nil {
		return nil, ans, err
	}
	second, err := w.read(openers)
	if err != nil {
		return nil, ans, err
	}
	for _, n := range credit {
		ans.InFlight += n
	}
	ans.Why = first.holds(devs, credit)
	if ans.Why == "" && !first.equal(second) {
		ans.Why = "the openers' files changed while they were read"
	}
	if ans.Why == "" {
		ans.Why, err = w.lost()
	}
	self := os.Getpid()
	files = slices.DeleteFunc(second.files, func(f fileRec) bool { return int(f.Tgid) == self })
	return files, ans, err
}

// liveOpeners opens a pidfd on every opener still alive and forgets the
// dead (their key, tgid and start time, names no one again).
func (w *Watch) liveOpeners() ([]*proc.Handle, error) {
	var k devwatchOpenerKey
	var v uint8
	var dead []devwatchOpenerKey
	var live []*proc.Handle
	self := os.Getpid()
	it := w.objs.Openers.Iterate()
	for it.Next(&k, &v) {
		if int(k.Tgid) == self {
			continue
		}
		h, err := proc.Open(proc.Ident{PID: int(k.Tgid), Start: NsToTicks(k.StartNs)})
		switch {
		case errors.Is(err, proc.ErrGone):
			dead = append(dead, k)
		case err != nil:
			return live, err
		default:
			live = append(live, h)
		}
	}
	if err := it.Err(); err != nil {
		return live, fmt.Errorf("reading the device watch's openers: %w", err)
	}
	for _, k := range dead {
		w.objs.Openers.Delete(k)
	}
	return live, nil
}

func closeHandles(hs []*proc.Handle) {
	for _, h := range hs {
		h.Close()
	}
}

// read reads this process's files, each opener's files and mappings, and
// the tracked dentries, in that order.
func (w *Watch) read(openers []*proc.Handle) (view, error) {
	var v view
	selfFD, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		return v, fmt.Errorf("pidfd_open of this process: %w", err)
	}
	defer unix.Close(selfFD)
	if v.files, err = readRecs[fileRec](w.objs.AccountFiles, selfFD, "device-watch files"); err != nil {
		return v, err
	}
	for _, h := range openers {
		files, err := readRecs[fileRec](w.objs.AccountFiles, h.FD, "device-watch files")
		if err != nil {
			return v, err
		}
		vmas, err := readRecs[vmaRec](w.objs.AccountVmas, h.FD, "device-watch mappings")
		if err != nil {
			return v, err
		}
		v.files, v.vmas = append(v.files, files...), append(v.vmas, vmas...)
	}
	v.dentries, err = w.readDentries()
	return v, err
}

// readRecs runs an iter/task_file or iter/task_vma program on the process
// pidFD names (-1: on every task of the host) and decodes its records.
func readRecs[T any](prog *ebpf.Program, pidFD int, what string) ([]T, error) {
	var raw []byte
	var err error
	if pidFD < 0 {
		raw, err = runIter(prog, what)
	} else {
		var it *link.Iter
		if it, err = attachTaskIterInfo(prog, &iterTaskInfo{pidFD: uint32(pidFD)}); err != nil {
			return nil, fmt.Errorf("attaching the %s BPF iterator to one process: %w", what, err)
		}
		raw, err = readLink(it, what)
	}
	if err != nil {
		return nil, err
	}
	return decodeRecs[T](raw, what)
}

// decodeRecs decodes whole records of T (host byte order).
func decodeRecs[T any](raw []byte, what string) ([]T, error) {
	var zero T
	size := binary.Size(zero)
	if size <= 0 || len(raw)%size != 0 {
		return nil, fmt.Errorf("the %s BPF iterator wrote %d bytes, not a whole number of %d-byte records", what, len(raw), size)
	}
	out := make([]T, len(raw)/size)
	if err := binary.Read(bytes.NewReader(raw), binary.NativeEndian, out); err != nil {
		return nil, fmt.Errorf("decoding the %s records: %w", what, err)
	}
	return out, nil
}

// readDentries reads every tracked dentry's count (the program runs on
// this process alone and walks the map).
func (w *Watch) readDentries() ([]dentryRec, error) {
	self, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		return nil, fmt.Errorf("pidfd_open of this process: %w", err)
	}
	defer unix.Close(self)
	return readRecs[dentryRec](w.objs.ReadDentries, self, "device-watch nodes")
}

// devFiles is files as FindDeviceFiles reports them.
func devFiles(files []fileRec) []DevFile {
	out := make([]DevFile, 0, len(files))
	for _, f := range files {
		out = append(out, DevFile{
			PID: int(f.Tgid), TID: int(f.Tid), FD: int(f.Fd), StartNs: f.StartNs,
			Dev: Dev{Block: f.Kind == devKindBlock, Major: f.Rdev >> 20, Minor: f.Rdev & 0xfffff},
		})
	}
	return out
}
