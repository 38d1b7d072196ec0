// pinned_lineage.go owns reading a hold's pinned lineage map from outside
// the hold (the guard): is this process, by pid and start time, a member?
package bpf

import (
	"fmt"
	"path/filepath"

	"github.com/cilium/ebpf"

	"github.com/gpu-hold/gpu-hold/internal/proc"
)

// PinnedLineage is a hold's pinned lineage map, opened read-only.
type PinnedLineage struct{ m *ebpf.Map }

// OpenPinnedLineage opens the lineage map hold holdID pinned.
func OpenPinnedLineage(holdID string) (*PinnedLineage, error) {
	if !validHoldID(holdID) {
		return nil, fmt.Errorf("hold id %q: use letters, digits, '.', '_' and '-' only", holdID)
	}
	m, err := ebpf.LoadPinnedMap(filepath.Join(PinDir(holdID), lineageMapLineage), &ebpf.LoadPinOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("opening hold %s's pinned lineage: %w", holdID, err)
	}
	return &PinnedLineage{m: m}, nil
}

// Has reports whether id is a member: its tgid is in the map with id's
// start time (a stale entry for a reused pid does not count).
func (p *PinnedLineage) Has(id proc.Ident) bool {
	var m lineageMember
	if p == nil || p.m.Lookup(uint32(id.PID), &m) != nil {
		return false
	}
	return NsToTicks(m.StartNs) == id.Start
}

// Close closes the map (nil-safe).
func (p *PinnedLineage) Close() {
	if p != nil {
		p.m.Close()
	}
}
