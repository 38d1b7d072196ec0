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

// SparesLow reports whether fewer spares than the stock are there.
func SparesLow() bool { return bpf.SpareCount() < bpf.SpareStock }

// SealEnv is the environment variable that forces a seal (bpf.SealEnv);
// a maker must make spares under the same request.
const SealEnv = bpf.SealEnv

// MakeSpares tops the stock of spares up and returns how many it made.
func MakeSpares() (int, error) { return bpf.MakeSpares(bpf.SpareStock) }
