// spare_make.go owns making spares: loading unattached copies of the
// lineage and pinning them under SpareRoot until SpareStock are there, one
// maker at a time, and sweeping what dead makers, dead takers and older
// builds left.
package bpf

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// staleSpareWork is how old a half-made or half-taken spare directory must
// be before a maker removes it (its maker or taker died).
const staleSpareWork = time.Minute

// SpareCount is how many spares of this build and the environment's seal
// request are there to take.
func SpareCount() int {
	req, err := sealRequest()
	if err != nil {
		return 0
	}
	names, _ := spareNames()
	n := 0
	for _, name := range names {
		if _, ok := spareSeal(name, req); ok {
			n++
		}
	}
	return n
}

// MakeSpares makes spares until stock of the environment's seal request
// are there, and returns how many it made. Another maker at work makes
// this one return at once.
func MakeSpares(stock int) (int, error) {
	req, err := sealRequest()
	if err != nil {
		return 0, err
	}
	root, err := openSpareRoot()
	if err != nil {
		return 0, err
	}
	defer root.Close()
	maker, err := lockMakers()
	if maker == nil {
		return 0, err // another maker at work, or the lock cannot be made
	}
	defer maker.Close()
	sweepSpares()
	seal, err := sealFor(Options{})
	if err != nil {
		return 0, err
	}
	if err := errors.Join(pinDevscan(), pinGroups()); err != nil {
		return 0, err
	}
	made := 0
	for SpareCount() < stock {
		pinned, err := makeSpare(root, req, seal, stock)
		if err != nil || !pinned {
			return made, err
		}
		made++
	}
	return made, nil
}

// makersLock is the directory under SpareRoot a maker holds locked while
// it works, one maker at a time. The stock lock, on SpareRoot itself, is
// held only while the stock is counted and a spare pinned: a maker that
// held it through its loads (at SCHED_IDLE, slow on a busy host) made
// every lineage given back meanwhile be freed, and the heads of a fast
// chain load their own.
const makersLock = "makers"

// lockMakers takes the makers' lock without waiting: nil when another
// maker holds it.
func lockMakers() (*os.File, error) {
	dir := filepath.Join(SpareRoot(), makersLock)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("creating the makers' lock %s: %w", dir, err)
	}
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("opening the makers' lock %s: %w", dir, err)
	}
	if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
		f.Close()
		return nil, nil
	}
	return f, nil
}

// openSpareRoot mounts the BPF filesystem when needed and opens SpareRoot,
// made root's own.
func openSpareRoot() (*os.File, error) {
	if err := mountBPFFS(); err != nil {
		return nil, err
	}
	if err := os.Mkdir(SpareRoot(), 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("creating %s: %w", SpareRoot(), err)
	}
	if _, err := spareNames(); err != nil && !errors.Is(err, ErrNoSpare) {
		return nil, err
	}
	return os.Open(SpareRoot())
}

// makeSpare loads one copy and attaches it without the stock lock (a
// lineage given back may be pinned meanwhile), then, under the lock, pins
// it under a working name and renames it into view (a taker never sees a
// spare half pinned) when the stock still wants it; else frees it.
func makeSpare(root *os.File, req string, seal SealMode, stock int) (bool, error) {
	l, err := loadObjects(seal, Options{})
	if err != nil {
		return false, err
	}
	defer l.Close() // the pins keep the objects
	if err := l.attach(); err != nil {
		return false, err
	}
	var pinned bool
	err = atNormalPriority(func() error {
		if err := unix.Flock(int(root.Fd()), unix.LOCK_EX); err != nil {
			return fmt.Errorf("taking the stock lock on %s: %w", SpareRoot(), err)
		}
		defer unix.Flock(int(root.Fd()), unix.LOCK_UN)
		if SpareCount() >= stock {
			return nil
		}
		pinned = true
		return l.pinSpare(req, seal)
	})
	return pinned, err
}

// atNormalPriority runs fn on a thread of its own at the normal policy: a
// maker runs at SCHED_IDLE, and one starved on a busy host while it holds
// the stock lock would keep every lineage given back from the stock.
func atNormalPriority(fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if before, err := unix.SchedGetAttr(0, 0); err == nil && before.Policy == unix.SCHED_IDLE {
		normal := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_NORMAL}
		if unix.SchedSetAttr(0, &normal, 0) == nil {
			defer unix.SchedSetAttr(0, before, 0)
		}
	}
	return fn()
}

// pinSpare pins l's maps, programs and links as a spare of req and seal.
// A spare stays attached: with programs of its own on the three
// tracepoints, the host keeps them enabled, and a hold's attach and
// detach no longer patch the kernel's text on every CPU (hundreds of
// microseconds each way, against a few). Unconfigured, it admits no one.
func (l *Lineage) pinSpare(req string, seal SealMode) error {
	pins := map[string]pinner{}
	for _, name := range pinMaps {
		pins[name] = l.mapByName(name)
	}
	for i, p := range []pinner{l.progs.OnExit, l.progs.OnExec, l.progs.OnFork} {
		pins[spareProgs[i]] = p
	}
	for i, lk := range l.links {
		pins[pinLinks[i]] = lk
	}
	return pinDir(filepath.Join(SpareRoot(), sparePrefix(req)+string(seal)+"_"+uniqueName()), pins)
}

// pinner is a map or program that can be pinned.
type pinner interface{ Pin(string) error }

// pinDir pins objs (by file name) under a working name, then renames the
// directory to dir: a reader never sees it half pinned. A shared iterator
// another process pinned there first is as good.
func pinDir(dir string, objs map[string]pinner) error {
	work := filepath.Join(SpareRoot(), "making_"+uniqueName())
	if err := os.Mkdir(work, 0o700); err != nil {
		return fmt.Errorf("creating a spare directory: %w", err)
	}
	var errs []error
	for name, o := range objs {
		errs = append(errs, o.Pin(filepath.Join(work, name)))
	}
	err := errors.Join(errs...)
	if err == nil {
		err = os.Rename(work, dir)
	}
	if err != nil {
		removeSpareDir(work)
		if _, serr := os.Stat(dir); serr == nil {
			return nil // another process pinned it first
		}
		return fmt.Errorf("pinning %s: %w", filepath.Base(dir), err)
	}
	return nil
}

// sweepSpares removes spares and shared iterators of other builds, and working
// directories
// older than staleSpareWork. Called under the maker's lock.
func sweepSpares() {
	names, _ := spareNames()
	for _, name := range names {
		dir := filepath.Join(SpareRoot(), name)
		if name == makersLock {
			continue
		}
		if strings.HasPrefix(name, "making_") || strings.HasPrefix(name, "taken_") {
			if fi, err := os.Stat(dir); err == nil && time.Since(fi.ModTime()) > staleSpareWork {
				removeSpareDir(dir)
			}
			continue
		}
		// This build's: a spare (<build>_...) or a shared iterator (<kind>_<build>).
		if !strings.HasPrefix(name, spareBuild()+"_") && !strings.HasSuffix(name, "_"+spareBuild()) {
			removeSpareDir(dir)
		}
	}
}
