// etcd.go owns section 4's fleet rows: the same hand-off chain through
// etcd on loopback (internal/etcdserver, a process of its own) beside the
// directory, and both with 100 waiters.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/gpu-hold/gpu-hold/internal/etcdtest"
)

// fleetWaiters is the long chain's length.
const fleetWaiters = 100

// fleetHandoff measures the etcd chain and the 100-waiter chains on the
// procfs backend (the tracker is not what they compare).
func (b *bench) fleetHandoff() ([]HandoffMode, error) {
	// gpu-hold execs gpu-hold-fleet for an etcd queue, so the rows
	// measure that exec too, as every fleet hold pays it.
	if fleet := filepath.Join(filepath.Dir(b.bin), "gpu-hold-fleet"); !isFile(fleet) {
		return nil, fmt.Errorf("the fleet rows need %s beside %s: build both with make build", fleet, b.bin)
	}
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

func isFile(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}
