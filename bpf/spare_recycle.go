// spare_recycle.go owns giving a finished hold's lineage back to the
// spares: once quiet, reset to what a fresh load is, checked as a taker
// checks a spare, and pinned as the maker pins one. A chain of holds then
// takes back what it gives, instead of outrunning the one maker and
// loading its own copy while the device waits.
package bpf

import (
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Recycle gives the lineage back to the spares when it may be one
// (mayRecycle), is quiet (nothing can be admitted, nothing is left to
// report), the stock lock comes within stockWait and fewer than
// SpareStock are there. It stays attached (see pinSpare). rd is its
// reader: what the ring buffer still holds is drained and dropped (the
// hold's record is closed by now).
// It reports whether the lineage became a spare; close it either way (the
// pins keep the objects, and a lineage not given back is detached and
// freed).
func (l *Lineage) Recycle(rd *Reader) (bool, error) {
	if !l.mayRecycle() || !l.quiet() {
		return false, nil
	}
	root, ok := lockStock()
	if !ok {
		return false, nil
	}
	defer root.Close()
	if SpareCount() >= SpareStock {
		return false, nil
	}
	if _, err := rd.Drain(func(Event) {}); err != nil {
		return false, err
	}
	if err := l.reset(); err != nil {
		return false, err
	}
	if err := l.checkPristine(); err != nil {
		return false, nil // an event came in after all: not a spare
	}
	if err := l.pinSpare(l.req, l.seal); err != nil {
		return false, fmt.Errorf("giving the lineage back to the spares: %w", err)
	}
	return true, nil
}

// GiveBackUnused gives the stock a copy loaded for a hold that took a
// spare after all, as Recycle does. It never ran a payload, and the pins
// under its hold's id, if any, are that spare's: it is checked under a
// name no hold pins.
func (l *Lineage) GiveBackUnused(rd *Reader) (bool, error) {
	l.holdID = "unused-" + uniqueName() // bpffs refuses a name with a dot
	return l.Recycle(rd)
}

// quiet: no launcher is named and the lineage map is empty, so the
// attached programs can admit no one and emit nothing from now on (and
// resetting the seal frees no member from it).
func (l *Lineage) quiet() bool {
	c, err := l.readConfig()
	if err != nil || c.Launcher != 0 {
		return false
	}
	empty, err := l.lineageEmpty()
	return err == nil && empty
}

// lockStock opens the spare directory, when it is root's own, and takes
// the stock lock on it: the stock is counted and filled by one process at
// a time, so a lineage given back never grows it past SpareStock. Makers
// and lineages given back hold it only to count and pin (makeSpare), so
// it waits for it, up to stockWait, and then gives up: the lineage is
// freed, as one that finds the stock full is.
func lockStock() (*os.File, bool) {
	if _, err := spareNames(); err != nil {
		return nil, false
	}
	root, err := os.Open(SpareRoot())
	if err != nil {
		return nil, false
	}
	for end := time.Now().Add(stockWait); ; time.Sleep(time.Millisecond) {
		if unix.Flock(int(root.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil {
			return root, true
		}
		if time.Now().After(end) {
			root.Close()
			return nil, false
		}
	}
}

// stockWait bounds lockStock's wait: a pin takes about a millisecond.
const stockWait = 50 * time.Millisecond

// mayRecycle: loaded or taken as the environment still asks (no seal or
// size forced), with its programs, and no pins of its hold left: a
// successor that found them would take the lineage for a dead holder's,
// and seal and end whatever the next hold to take it runs.
func (l *Lineage) mayRecycle() bool {
	req, err := sealRequest()
	if err != nil || l.req == "" || l.req != req || l.progs.OnFork == nil {
		return false
	}
	_, err = os.Lstat(PinDir(l.holdID))
	return errors.Is(err, os.ErrNotExist)
}

// reset zeroes the config (hold id, launcher, seal) and the state (root and
// counters): what a fresh load holds.
func (l *Lineage) reset() error {
	if err := l.writeConfig(lineageHoldConfig{}); err != nil {
		return err
	}
	if l.maps.State == nil {
		return ErrClosed
	}
	return l.maps.State.Put(uint32(0), lineageHoldState{})
}
