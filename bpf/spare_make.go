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
	if err := unix.Flock(int(root.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return 0, nil // another maker holds the lock
	}
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
		if err := makeSpare(req, seal); err != nil {
			return made, err
		}
		made++
	}
	return made, nil
}

// openSpareRoot mounts the BPF filesystem when needed and opens SpareRoot,
// made root's own.
func openSpareRoot() (*os.File, error) {
	if err := mountBPFFS(); err != nil {
		return nil, err
	}
	if err := os.Mkdir(SpareRoot, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("creating %s: %w", SpareRoot, err)
	}
	if _, err := spareNames(); err != nil && !errors.Is(err, ErrNoSpare) {
		return nil, err
	}
	return os.Open(SpareRoot)
}

// makeSpare loads one copy and pins it under a working name, then renames
// it into view: a taker never sees a spare half pinned.
func makeSpare(req string, seal SealMode) error {
	l, err := loadObjects(seal, Options{})
	if err != nil {
		return err
	}
	defer l.Close() // the pins keep the objects
	work := filepath.Join(SpareRoot, "making_"+uniqueName())
	if err := os.Mkdir(work, 0o700); err != nil {
		return fmt.Errorf("creating a spare directory: %w", err)
	}
	if err := l.pinSpare(work); err != nil {
		removeSpareDir(work)
		return err
	}
	if err := os.Rename(work, filepath.Join(SpareRoot, sparePrefix(req)+string(seal)+"_"+uniqueName())); err != nil {
		removeSpareDir(work)
		return fmt.Errorf("publishing a spare: %w", err)
	}
	return nil
}

// pinSpare pins the maps and the (unattached) programs in dir.
func (l *Lineage) pinSpare(dir string) error {
	for _, name := range pinMaps {
		if err := l.mapByName(name).Pin(filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("pinning spare map %s: %w", name, err)
		}
	}
	for i, p := range []interface{ Pin(string) error }{l.progs.OnExit, l.progs.OnExec, l.progs.OnFork} {
		if err := p.Pin(filepath.Join(dir, spareProgs[i])); err != nil {
			return fmt.Errorf("pinning spare program %s: %w", spareProgs[i], err)
		}
	}
	return nil
}

// sweepSpares removes spares and shared iterators of other builds, and working
// directories
// older than staleSpareWork. Called under the maker's lock.
func sweepSpares() {
	names, _ := spareNames()
	for _, name := range names {
		dir := filepath.Join(SpareRoot, name)
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
