// etcd.go owns section 4's fleet rows: the same hand-off chain through
// etcd on loopback (internal/etcdserver, a process of its own) beside the
// directory, and both with 100 waiters.
package main

import (
	"fmt"

	"github.com/gpu-hold/gpu-hold/internal/etcdtest"
)

// fleetWaiters is the long chain's length.
const fleetWaiters = 100

// fleetHandoff measures the etcd chain and the 100-waiter chains on the
// procfs backend (the tracker is not what they compare).
func (b *bench) fleetHandoff() ([]HandoffMode, error) {
	s, err := etcdtest.StartIn(b.path("etcd-data"))
	if err != nil {
		return nil, fmt.Errorf("etcd for the fleet rows: %v", err)
	}
	defer s.Kill()
	defer etcdtest.Cleanup()
	waiters := fleetWaiters
	if b.cfg.Quick {
		waiters = 20
	}
	var out []HandoffMode
	for _, r := range []struct {
		mode string
		n    int
		etcd bool
	}{
		{"gpu-hold proc, etcd", b.cfg.Chain, true},
		{fmt.Sprintf("gpu-hold proc, %d waiters", waiters), waiters, false},
		{fmt.Sprintf("gpu-hold proc, etcd, %d waiters", waiters), waiters, true},
	} {
		var env []string
		if r.etcd {
			b.seq++
			env = []string{fmt.Sprintf("GPU_HOLD_QUEUE=%s", s.URL(fmt.Sprintf("/bench-%d", b.seq)))}
		}
		reps := b.cfg.ChainReps
		if r.n > b.cfg.Chain {
			reps = 1
		}
		m, err := b.holdChains(r.mode, "proc", r.n, reps, env)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", r.mode, err)
		}
		out = append(out, m)
	}
	return out, nil
}
