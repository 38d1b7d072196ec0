// spares.go owns the eBPF backend's spare lineages (package bpf): a hold
// takes one when one is there (or comes back while it loads its own)
// instead of loading its own, and the stock is kept by the lineages holds
// give back and by a maker a hold starts after its release.
package tracker

import (
	"time"

	"github.com/gpu-hold/gpu-hold/bpf"
)

// loadLineage takes a spare for the hold, else loads a fresh copy. While
// it loads, it looks for a spare every sparePoll and takes one that came
// back (in a chain of short holds, each lineage comes back a moment after
// its hold's release, often just after the next head found the stock
// empty); the fresh copy then goes to the stock once loaded, or is freed.
// A seal the options force (tests) always loads.
func loadLineage(opts Options) (*bpf.Lineage, error) {
	load := func() (*bpf.Lineage, error) { return bpf.Load(bpf.Options{HoldID: opts.HoldID, Seal: opts.Seal}) }
	if opts.Seal != "" || opts.HoldID == "" {
		return load()
	}
	if l, err := bpf.TakeSpare(opts.HoldID); err == nil {
		return l, nil
	}
	fresh := make(chan loaded, 1)
	go func() {
		l, err := load()
		fresh <- loaded{l, err}
	}()
	poll := time.NewTicker(sparePoll)
	defer poll.Stop()
	for {
		select {
		case r := <-fresh:
			return r.l, r.err
		case <-poll.C:
			if l, err := bpf.TakeSpare(opts.HoldID); err == nil {
				go giveBackUnused(fresh)
				return l, nil
			}
		}
	}
}

// sparePoll is how often a hold loading its own copy looks for a spare.
// A load is short: a few reads of the spare directory do, where a watch
// on it would need a descriptor and a goroutine of its own.
const sparePoll = 2 * time.Millisecond

// loaded is a fresh copy's load.
type loaded struct {
	l   *bpf.Lineage
	err error
}

// giveBackUnused gives the stock the copy a hold loaded and did not use,
// or frees it (a hold that exits first frees it with its descriptors).
func giveBackUnused(fresh <-chan loaded) {
	r := <-fresh
	if r.err != nil {
		return
	}
	defer r.l.Close() // the pins keep a copy given back
	if rd, err := r.l.NewReader(); err == nil {
		r.l.GiveBackUnused(rd)
		rd.Close()
	}
}

// SpareRootEnv names a test's own spare root (bpf.SpareRootEnv), which a
// hold passes on to its spare maker.
const SpareRootEnv = bpf.SpareRootEnv

// SpareRoot is where the spares are pinned.
func SpareRoot() string { return bpf.SpareRoot() }

// SpareCount is how many spares are there to take.
func SpareCount() int { return bpf.SpareCount() }

// IteratorsPinned reports whether the host's shared device-scan and
// process-group iterators are pinned (the spare maker pins both).
func IteratorsPinned() (devscan, groups bool) { return bpf.DevscanPinned(), bpf.GroupsPinned() }

// SparesLow reports whether fewer spares than the stock are there.
func SparesLow() bool { return bpf.SpareCount() < bpf.SpareStock }

// SealEnv is the environment variable that forces a seal (bpf.SealEnv);
// a maker must make spares under the same request.
const SealEnv = bpf.SealEnv

// MakeSpares tops the stock of spares up and returns how many it made.
func MakeSpares() (int, error) { return bpf.MakeSpares(bpf.SpareStock) }

// programs says where the lineage's programs came from: "spare" (taken
// from the spares) or "loaded" (by this hold).
func (t *bpfTracker) programs() string {
	if t.l.FromSpare() {
		return "spare"
	}
	return "loaded"
}
