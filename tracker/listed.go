// listed.go owns Listed: a tracker whose kernel-side account names every
// live member, so that a teardown can read just those processes instead of
// walking every process on the host.
package tracker

import "github.com/gpu-hold/gpu-hold/proc"

// Listed is a Tracker that can name its live members from its kernel-side
// account alone. ok is false when the account is not complete (a member
// lost to a full map) or cannot be read: the caller walks /proc.
type Listed interface {
	ListLive() (live []proc.Stat, ok bool)
}

// ListLive names the live members from the lineage map, each checked
// against its /proc start time (Live).
func (t *bpfTracker) ListLive() ([]proc.Stat, bool) {
	c, err := t.l.Counters()
	if err != nil || c.Overflow > 0 {
		return nil, false
	}
	live, err := t.Live()
	return live, err == nil
}
