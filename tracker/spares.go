// spares.go owns the eBPF backend's spare lineages (package bpf): a hold
// takes one when one is there instead of loading its own, and the stock is
// kept by a maker the hold starts once its payload runs.
package tracker

import "github.com/gpu-hold/gpu-hold/bpf"

// loadLineage takes a spare for the hold, else loads a fresh copy. A seal
// the options force (tests) always loads.
func loadLineage(opts Options) (*bpf.Lineage, error) {
	if opts.Seal == "" && opts.HoldID != "" {
		if l, err := bpf.TakeSpare(opts.HoldID); err == nil {
			return l, nil
		}
	}
	return bpf.Load(bpf.Options{HoldID: opts.HoldID, Seal: opts.Seal})
}

// SpareRoot is where the spares are pinned.
const SpareRoot = bpf.SpareRoot

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

// Programs says where an eBPF tracker's programs came from: "spare" (taken
// from the spares) or "loaded" (by this hold); "" for procfs.
func Programs(tr Tracker) string {
	t, ok := tr.(*bpfTracker)
	switch {
	case !ok:
		return ""
	case t.l.FromSpare():
		return "spare"
	}
	return "loaded"
}
