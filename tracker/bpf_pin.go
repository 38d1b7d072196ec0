// bpf_pin.go owns the eBPF backend's pins: a hold pins its lineage so that
// the kernel keeps tracking (and can be sealed) after the holder dies, and a
// successor opens a dead holder's pinned lineage to end it, then unpins it.
package tracker

import (
	"errors"
	"os/exec"

	"github.com/gpu-hold/gpu-hold/bpf"
	"github.com/gpu-hold/gpu-hold/proc"
)

// Pinner is implemented by trackers whose lineage can outlive the holder
// process (the eBPF backend).
type Pinner interface {
	// Pin pins the lineage under /sys/fs/bpf/gpu-hold/<hold id>/ (mounting
	// the BPF filesystem if needed) and returns the directory. Close then
	// leaves it tracking in the kernel.
	Pin() (string, error)
	// Unpin removes the pins: after Close the kernel objects are freed.
	Unpin() error
}

// Pin implements Pinner.
func (t *bpfTracker) Pin() (string, error) { return t.l.Pin() }

// Unpin implements Pinner.
func (t *bpfTracker) Unpin() error { return t.l.Unpin() }

// OpenPinnedBPF opens the lineage a (dead) holder pinned for holdID. The
// tracker it returns was never launched: Prepare and Started fail; Live,
// Changed, Seal, Counters work on the dead holder's members, and its Unpin
// ends the pins. Events still in the ring buffer, and those that follow, go
// to opts.Sink.
func OpenPinnedBPF(holdID string, opts Options) (Tracker, error) {
	l, err := bpf.OpenPinned(holdID)
	if err != nil {
		return nil, err
	}
	t, err := startBPFTracker(l, opts)
	if err != nil {
		return nil, err
	}
	return &pinnedTracker{t.(*bpfTracker)}, nil
}

// PinnedBPFHolds lists the hold ids with a pinned lineage.
func PinnedBPFHolds() ([]string, error) { return bpf.PinnedHolds() }

// pinnedTracker is a dead holder's lineage: it cannot launch anything.
type pinnedTracker struct{ *bpfTracker }

var errPinnedLaunch = errors.New("a pinned lineage opened from a dead holder cannot launch a payload")

func (p *pinnedTracker) Prepare(*exec.Cmd) error  { return errPinnedLaunch }
func (p *pinnedTracker) Started(proc.Ident) error { return errPinnedLaunch }
