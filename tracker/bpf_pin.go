// bpf_pin.go owns the eBPF backend's pins: a hold pins its lineage so that
// the kernel keeps tracking (and can be sealed) after the holder dies, and a
// successor opens a dead holder's pinned lineage to end it, then unpins it.
package tracker

import (
	"errors"
	"os"
	"os/exec"
	"time"

	"github.com/gpu-hold/gpu-hold/bpf"
	"github.com/gpu-hold/gpu-hold/internal/proc"
)

// pin pins the lineage under /sys/fs/bpf/gpu-hold/<hold id>/ (mounting
// the BPF filesystem if needed) and returns the directory. Close then
// leaves it tracking in the kernel.
func (t *bpfTracker) pin() (string, error) { return t.l.Pin() }

// unpin removes the pins: after Close the kernel objects are freed.
func (t *bpfTracker) unpin() error { return t.l.Unpin() }

// OpenPinnedBPF opens the lineage a (dead) holder pinned for holdID. The
// lineage it returns was never launched: Prepare and Started fail; Live,
// Changed, Seal, Counters work on the dead holder's members, and its Unpin
// ends the pins. Events still in the ring buffer, and those that follow, go
// to opts.Sink.
func OpenPinnedBPF(holdID string, opts Options) (*Lineage, error) {
	l, err := bpf.OpenPinned(holdID)
	if err != nil {
		return nil, err
	}
	t, err := startBPFTracker(l, opts, true)
	if err != nil {
		return nil, err
	}
	return lineageOf(&pinnedTracker{t}), nil
}

// pinnedTracker is a dead holder's lineage: it cannot launch anything.
type pinnedTracker struct{ *bpfTracker }

var errPinnedLaunch = errors.New("a pinned lineage opened from a dead holder cannot launch a payload")

func (p *pinnedTracker) Prepare(*exec.Cmd) error  { return errPinnedLaunch }
func (p *pinnedTracker) Started(proc.Ident) error { return errPinnedLaunch }

// programs is "": a dead holder's programs are not this hold's own.
func (p *pinnedTracker) programs() string { return "" }

// stalePinAge is how long a pinned lineage must have existed, empty,
// before a new hold removes it.
const stalePinAge = 10 * time.Minute

// SweepPins removes pinned lineages that no longer track anything: older
// than stalePinAge and with no member left (their holder died and no
// successor came for them, or it came and everything had already exited).
// A pinned lineage with a live member is never touched: a reaper needs it.
// It returns the hold ids it removed.
func SweepPins() []string {
	ids, err := bpf.PinnedHolds()
	if err != nil {
		return nil
	}
	var removed []string
	for _, id := range ids {
		fi, err := os.Stat(bpf.PinDir(id))
		if err != nil || time.Since(fi.ModTime()) < stalePinAge {
			continue
		}
		l, err := bpf.OpenPinned(id)
		if err != nil {
			os.Remove(bpf.PinDir(id)) // an empty or broken pin directory
			continue
		}
		if ms, err := l.Members(); err == nil && len(ms) == 0 {
			if l.Unpin() == nil {
				removed = append(removed, id)
			}
		}
		l.Close()
	}
	return removed
}
