// backend.go owns what the choice of tracker backend (lazytracker.go)
// tells a user: the reason eBPF cannot be used, and the pinned lineages
// of gone holds swept when eBPF is.
package hold

import (
	"github.com/gpu-hold/gpu-hold/tracker"
)

// bpfReason turns a load failure into the reason a user can act on: the
// probe's (no privilege, no BTF, old kernel) when it has one.
func bpfReason(err error) error {
	if perr := tracker.ProbeBPF(); perr != nil {
		return perr
	}
	return err
}

// sweepPins removes long-empty pinned lineages of holds that are gone.
func (h *holdRun) sweepPins() {
	for _, id := range tracker.SweepPins() {
		h.o.Log.Info().Str("hold", id).Msg("removed an empty pinned lineage left by a hold that died")
	}
}
