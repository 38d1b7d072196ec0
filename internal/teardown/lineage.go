// lineage.go owns what the teardown asks of the tracked lineage: only the
// methods it calls, which tracker.Lineage has (live or from a dead
// holder's pins) and a test's fake can have too.
package teardown

import (
	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/tracker"
)

// Lineage is the tracked lineage a teardown ends.
type Lineage interface {
	// LiveIn is the members alive in walk s.
	LiveIn(s *proc.Snapshot) []proc.Stat
	// Snapshot is what a pass reads to find the members without a walk of
	// /proc; ok false: only a walk will do.
	Snapshot() (s *proc.Snapshot, ok bool)
	// Account is the kernel-side account of live members; an error (such
	// as tracker.ErrNotSupported) means it is not known.
	Account() (some, known bool, err error)
	// Changed signals a birth or an exit; nil: rescan on a timer.
	Changed() <-chan struct{}
	// Seal stops the lineage from growing, as far as it can.
	Seal() error
}

var _ Lineage = (*tracker.Lineage)(nil)
