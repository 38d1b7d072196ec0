// devwatch_seed.go owns the two halves of the watch's judgement: whether one
// read of the openers holds (view.holds), and the seed, which reads every
// fd table on the host and teaches the watch its openers and nodes.
package bpf

import (
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/cilium/ebpf"
)

// refs is what a view saw of one file's references.
type refs struct {
	count uint64             // the kernel's
	slots map[[2]uint64]bool // fd table, fd
	maps  map[[2]uint64]bool // mm, vm_start
	odd   bool               // two records disagreed on count
}

func refsOf(byFile map[uint64]*refs, file, count uint64) *refs {
	r := byFile[file]
	if r == nil {
		r = &refs{count: count, slots: map[[2]uint64]bool{}, maps: map[[2]uint64]bool{}}
		byFile[file] = r
	}
	r.odd = r.odd || r.count != count
	return r
}

// filesVia groups the files of recs by the dentry they were opened through.
func filesVia(recs []fileRec) map[uint64]map[uint64]bool {
	via := map[uint64]map[uint64]bool{}
	for _, f := range recs {
		if via[f.Dentry] == nil {
			via[f.Dentry] = map[uint64]bool{}
		}
		via[f.Dentry][f.File] = true
	}
	return via
}

// devSet is a set of devices as the watch's records name them.
type devSet map[devwatchDevKey]bool

func newDevSet(devs []Dev) devSet {
	set := devSet{}
	for _, d := range devs {
		k := devKey(d)
		set[devwatchDevKey{Kind: k.Kind, Rdev: k.Rdev}] = true
	}
	return set
}

func (s devSet) has(kind, rdev uint32) bool { return s[devwatchDevKey{Kind: kind, Rdev: rdev}] }

// refsByFile is what v saw of the references to each file of devs.
func (v view) refsByFile(devs devSet) map[uint64]*refs {
	byFile := map[uint64]*refs{}
	for _, f := range v.files {
		if devs.has(f.Kind, f.Rdev) {
			refsOf(byFile, f.File, f.Fcount).slots[[2]uint64{f.Files, uint64(f.Fd)}] = true
		}
	}
	for _, m := range v.vmas {
		if devs.has(m.Kind, m.Rdev) {
			refsOf(byFile, m.File, m.Fcount).maps[[2]uint64{m.Mm, m.VmStart}] = true
		}
	}
	return byFile
}

func (r *refs) held() int { return len(r.slots) + len(r.maps) }

// excess returns the files of devs with more references than the openers'
// fd slots and mappings of them.
func (v view) excess(devs devSet) map[uint64]bool {
	out := map[uint64]bool{}
	for file, r := range v.refsByFile(devs) {
		if r.count > uint64(r.held()) {
			out[file] = true
		}
	}
	return out
}

// holds says why v does not account for every reference to the files and
// nodes of devs ("" when it does), given what credit says the openers'
// sleeping calls hold. Other devices' files do not bear on who holds devs:
// a file of another device that the openers cannot account for makes a
// check of that device a seed, not every check on the host.
func (v view) holds(devs devSet, credit map[uint64]int) string {
	for file, r := range v.refsByFile(devs) {
		if held := r.held() + credit[file]; r.odd || r.count != uint64(held) {
			return fmt.Sprintf("a file of a watched device has %d references, and the openers hold %d of them", r.count, held)
		}
	}
	via := filesVia(v.files)
	tracked := map[uint64]bool{}
	for _, d := range v.dentries {
		if d.Watched == 0 || !devs.has(d.Kind, d.Rdev) {
			continue // freed or reused (the next seed forgets it), or another device's
		}
		tracked[d.Dentry] = true
		if d.Known == 0 {
			return "a node of a watched device was first opened since the last seed"
		}
		if want := int64(len(via[d.Dentry])) + d.Structural; int64(d.Count) != want {
			return fmt.Sprintf("a node of a watched device has %d references, and the openers' files and its mounts account for %d", d.Count, want)
		}
	}
	for _, f := range v.files {
		if devs.has(f.Kind, f.Rdev) && !tracked[f.Dentry] {
			return "a file of a watched device is open through a node the watch does not track"
		}
	}
	return ""
}

// equal reports whether two reads saw the same.
func (v view) equal(o view) bool {
	return slices.Equal(v.files, o.files) && slices.Equal(v.vmas, o.vmas) && slices.Equal(v.dentries, o.dentries)
}

// seedRounds bounds the seed's rereads while it finds nodes it did not
// track, or nodes whose count moved while it read.
const seedRounds = 3

// seed reads every fd table on the host, adds every holder to the openers
// and every node to the tracked dentries (with what of its count is
// structural, where it held still), and marks the watched devices seeded.
// It returns the files it read, other than this process's.
func (w *Watch) seed() ([]fileRec, error) {
	counters, _, err := w.states()
	if err != nil {
		return nil, err
	}
	var files []fileRec
	learnt := true
	for round := 0; round < seedRounds; round++ {
		before, err := w.readDentries()
		if err != nil {
			return nil, err
		}
		if files, err = readRecs[fileRec](w.objs.AccountFiles, -1, "device-watch seed"); err != nil {
			return nil, err
		}
		after, err := w.readDentries()
		if err != nil {
			return nil, err
		}
		again, err := w.learn(files, before, after)
		if err != nil {
			return nil, err
		}
		if learnt = !again; learnt {
			break
		}
	}
	self := os.Getpid()
	files = slices.DeleteFunc(files, func(f fileRec) bool { return int(f.Tgid) == self })
	if !learnt {
		return files, nil // not trusted yet: the next check seeds again
	}
	return files, w.markSeeded(counters)
}

// learn adds the holders of files to the openers and teaches the dentries
// map what it read; again says a node was new or moved, so the seed reads
// once more.
func (w *Watch) learn(files []fileRec, before, after []dentryRec) (again bool, err error) {
	self := uint32(os.Getpid())
	for _, f := range files {
		if f.Tgid == self {
			continue
		}
		k := devwatchOpenerKey{Tgid: f.Tgid, StartNs: f.StartNs}
		if err := w.objs.Openers.Update(k, uint8(1), ebpf.UpdateAny); err != nil {
			return true, nil // full: the lost counter is not the programs', so seed again later
		}
	}
	was := map[uint64]int32{}
	for _, d := range before {
		if d.Watched != 0 {
			was[d.Dentry] = d.Count
		}
	}
	via := filesVia(files)
	tracked := map[uint64]bool{}
	for _, d := range after {
		if d.Watched == 0 {
			w.objs.Dentries.Delete(d.Dentry)
			continue
		}
		tracked[d.Dentry] = true
		structural := int64(d.Count) - int64(len(via[d.Dentry]))
		count, ok := was[d.Dentry]
		steady := ok && count == d.Count && structural >= 0
		again = again || !steady
		if err := w.setDentry(d.Dentry, steady, structural); err != nil {
			return true, err
		}
	}
	for _, f := range files {
		if !tracked[f.Dentry] {
			tracked[f.Dentry] = true
			again = true
			info := devwatchDentryInfo{Kind: f.Kind, Rdev: f.Rdev}
			if err := w.objs.Dentries.Update(f.Dentry, info, ebpf.UpdateNoExist); err != nil && !isExist(err) {
				return true, fmt.Errorf("tracking a device node in the device watch: %w", err)
			}
		}
	}
	return again, nil
}

// setDentry records a tracked dentry's structural count, or that it is not
// known.
func (w *Watch) setDentry(d uint64, known bool, structural int64) error {
	var info devwatchDentryInfo
	if err := w.objs.Dentries.Lookup(d, &info); err != nil {
		return nil // gone meanwhile
	}
	info.Known, info.Structural = 0, 0
	if known {
		info.Known, info.Structural = 1, structural
	}
	if err := w.objs.Dentries.Update(d, info, ebpf.UpdateExist); err != nil && !isNotExist(err) {
		return fmt.Errorf("updating a device node in the device watch: %w", err)
	}
	return nil
}

// markSeeded marks every watched device seeded and records the counters
// read before the seed began: a loss during the seed is a loss since it.
func (w *Watch) markSeeded(counters devwatchWatchState) error {
	var k devwatchDevKey
	var v uint8
	var keys []devwatchDevKey
	it := w.objs.Watched.Iterate()
	for it.Next(&k, &v) {
		keys = append(keys, k)
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("reading the device watch's devices: %w", err)
	}
	for _, k := range keys {
		if err := w.objs.Watched.Update(k, uint8(1), ebpf.UpdateAny); err != nil {
			return fmt.Errorf("marking a device seeded in the device watch: %w", err)
		}
	}
	if err := w.objs.State.Update(uint32(1), counters, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("recording the device watch's seed: %w", err)
	}
	return nil
}

func isExist(err error) bool    { return errors.Is(err, ebpf.ErrKeyExist) }
func isNotExist(err error) bool { return errors.Is(err, ebpf.ErrKeyNotExist) }
