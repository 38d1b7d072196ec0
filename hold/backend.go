// backend.go owns the choice of tracker backend: --track=bpf is eBPF or a
// clear error; auto is eBPF when it can load, else procfs with a one-line
// notice that says why; proc is procfs.
package hold

import (
	"fmt"

	"github.com/gpu-hold/gpu-hold/tracker"
)

// openTracker loads the tracker --track asks for. With auto, a backend
// that cannot load gives way to procfs with a one-line notice that says why.
func (h *holdRun) openTracker() (tracker.Tracker, error) {
	opts := tracker.Options{Sink: h.rec.event, Flush: h.rec.flush, HoldID: h.id}
	log := h.o.Log
	switch h.o.Track {
	case "proc":
		return tracker.New(tracker.BackendProc, opts)
	case "bpf":
		tr, err := tracker.New(tracker.BackendBPF, opts)
		if err != nil {
			return nil, fmt.Errorf("--track=bpf: %v; or use --track=proc", bpfReason(err))
		}
		h.sweepPins()
		return tr, nil
	}
	tr, err := tracker.New(tracker.BackendBPF, opts)
	if err == nil {
		h.sweepPins()
		return tr, nil
	}
	reason := bpfReason(err).Error()
	h.backendNote = "eBPF tracker unavailable, using procfs: " + reason
	log.Warn().Str("reason", reason).Msg(h.backendNote)
	return tracker.New(tracker.BackendProc, opts)
}

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
