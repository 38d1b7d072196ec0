// spare_recycle.go owns giving a finished hold's lineage back to the
// spares: detached, reset to what a fresh load is, checked as a taker
// checks a spare, and pinned as the maker pins one. A chain of holds then
// takes back what it gives, instead of outrunning the one maker and
// loading its own copy while the device waits.
package bpf

import (
	"errors"
	"fmt"
	"os"
)

// Recycle detaches the lineage and gives it back to the spares when it may
// be one (mayRecycle) and fewer than SpareStock are there. rd is its
// reader: what the ring buffer still holds is drained and dropped (the
// hold's record is closed by now). It reports whether the lineage became a
// spare; close it either way (the pins keep the objects).
func (l *Lineage) Recycle(rd *Reader) (bool, error) {
	if err := l.detach(); err != nil {
		return false, err
	}
	if !l.mayRecycle() || !stockLow() {
		return false, nil
	}
	if _, err := rd.Drain(func(Event) {}); err != nil {
		return false, err
	}
	if err := l.reset(); err != nil {
		return false, err
	}
	if err := l.checkPristine(); err != nil {
		return false, nil // a member left: not a spare
	}
	if err := l.pinSpare(l.req, l.seal); err != nil {
		return false, fmt.Errorf("giving the lineage back to the spares: %w", err)
	}
	return true, nil
}

// stockLow: the spare directory is there, root's own, and holds fewer than
// SpareStock of this build and request (a recycled spare never grows the
// stock past what the maker keeps).
func stockLow() bool {
	_, err := spareNames()
	return err == nil && SpareCount() < SpareStock
}

// mayRecycle: loaded or taken as the environment still asks (no seal or
// size forced), with its programs, and no pins of its hold left (pinned
// links would keep the programs attached).
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
