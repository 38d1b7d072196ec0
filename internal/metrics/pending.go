// pending.go owns a hold's counts on their way into the state: each hold
// first writes a pending file of its own (a fresh name, replaced
// atomically: no lock needed), then whoever holds the metrics lock adds
// every pending file there to the state. A hold that cannot get the lock
// in time loses nothing: its file waits for the next merge. Any member of
// a shared dir's group can plant pending files, so a merge's work is
// bounded, a planted file cannot take counts away, and what is not counted
// is reported in a bounded message.
package metrics

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gpu-hold/gpu-hold/internal/safefs"
)

// maxPendingLen bounds what is read of one pending file.
const maxPendingLen = 4 << 10

// maxMerge bounds the pending files one merge adds (the next takes the
// rest): a dir flooded with them does not hold one hold's lock for long.
// maxTries bounds the pending files one merge opens, those it cannot
// count among them; maxKept, the names the state keeps of files counted
// but not removed (another uid's, in a sticky dir), so that the state
// stays far below maxStateLen.
const (
	maxMerge = 1000
	maxTries = 2 * maxMerge
	maxKept  = 4 * maxMerge
)

// maxReported bounds the files one merge names in its error.
const maxReported = 3

// pendingPrefix starts resource base's pending files' names. A resource's
// base never holds a '.' (fileSafe), so no other resource's files match.
func pendingPrefix(base string) string { return base + ".pending-" }

func isPending(base, name string) bool {
	rest, ok := strings.CutPrefix(name, pendingPrefix(base))
	return ok && strings.HasSuffix(rest, ".json") && !strings.Contains(rest, ".tmp-")
}

// writePending writes m as a new pending file of base and returns its name.
func writePending(d *safefs.Dir, base string, m Hold) (string, error) {
	data, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	name := pendingPrefix(base) + randomHex() + ".json"
	if err := writeReplace(d, name, data); err != nil {
		return "", fmt.Errorf("the hold's metrics were not written: %v", err)
	}
	return name, nil
}

// mergePending adds to st every pending file of base not added yet, and
// sets st.Merged to the names a merge has added and not yet removed (so
// that none is added twice: a merge cut short after writing the state, or
// a file another uid owns in a sticky dir that only its owner removes).
// A pending file that cannot be read, or that no hold wrote, is reported
// and left alone; one file under two names (a hard link) counts once.
// own (may be "") is the caller's pending file, counted first.
func mergePending(d *safefs.Dir, base, own string, st *metricsState) error {
	names, err := d.Names()
	if err != nil {
		return err
	}
	slices.Sort(names)
	added := map[string]bool{}
	for _, n := range st.Merged {
		added[n] = true
	}
	var merged []string
	// The files added before first: a second name of one of them (a hard
	// link made since) is not a file to count again.
	seen := map[[2]uint64]bool{}
	for _, n := range names {
		if added[n] && isPending(base, n) {
			merged = append(merged, n) // only its removal is owed
			if info, err := d.Lstat(n); err == nil {
				seen[[2]uint64{info.Dev, info.Ino}] = true
			}
		}
	}
	var bad badFiles
	tries, fresh := 0, 0
	// The caller's own file first: a hold counts itself, flood or not.
	if i := slices.Index(names, own); own != "" && i >= 0 {
		names = slices.Concat([]string{own}, names[:i], names[i+1:])
	}
	for _, n := range names {
		switch {
		case !isPending(base, n) || added[n]:
		case fresh >= maxMerge || tries >= maxTries || len(merged) >= maxKept:
			bad.waiting++
		default:
			tries++
			m, info, err := readPending(d, n)
			if err != nil {
				bad.add(err)
				continue
			}
			if k := [2]uint64{info.Dev, info.Ino}; !seen[k] {
				seen[k] = true
				st.add(m)
			}
			merged, fresh = append(merged, n), fresh+1
			st.Counted = append(st.Counted, n)
		}
	}
	st.Merged = merged
	st.Counted = st.Counted[max(0, len(st.Counted)-maxMerge):]
	return bad.err(d, len(merged) >= maxKept)
}

// badFiles is what a merge could not count, for one bounded report.
type badFiles struct {
	errs    []error
	n       int // files that cannot be counted
	waiting int // files left for a later merge by the bounds
}

func (b *badFiles) add(err error) {
	if b.n++; len(b.errs) < maxReported {
		b.errs = append(b.errs, err)
	}
}

// err says what was not counted: the first few files by name, how many
// in all, and how many wait for a later merge.
func (b *badFiles) err(d *safefs.Dir, full bool) error {
	errs := b.errs
	if b.n > len(errs) {
		errs = append(errs, fmt.Errorf("%d more pending files in %s not counted", b.n-len(b.errs), d.Path()))
	}
	if b.waiting > 0 {
		why := fmt.Sprintf("one merge adds at most %d", maxMerge)
		if full {
			why = fmt.Sprintf("%d counted pending files are still there (another user's, in a sticky dir: only its owner or root removes them)", maxKept)
		}
		errs = append(errs, fmt.Errorf("%d pending files in %s wait for a later merge: %s", b.waiting, d.Path(), why))
	}
	return errors.Join(errs...)
}

// readPending reads one pending file and checks that a hold could have
// written it.
func readPending(d *safefs.Dir, name string) (Hold, safefs.Info, error) {
	var m Hold
	data, info, err := d.ReadFile(name, maxPendingLen)
	if err != nil {
		return m, info, fmt.Errorf("pending metrics %s not counted: %v", d.Join(name), err)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return m, info, fmt.Errorf("pending metrics %s is corrupt (%v) and not counted: remove it", d.Join(name), err)
	}
	if why := m.invalid(); why != "" {
		return m, info, fmt.Errorf("pending metrics %s (uid %d) is not a hold's (%s) and not counted: remove it", d.Join(name), info.UID, why)
	}
	return m, info, nil
}

// invalid says why m cannot be what a hold wrote: a count or a time below
// zero, which would take from the counters; "" when it can.
func (m Hold) invalid() string {
	switch {
	case m.Wait < 0 || m.Hold < 0:
		return "a time below zero"
	case m.Survivors < 0 || m.DeviceHolders < 0:
		return "a count below zero"
	}
	return ""
}

// removeMerged removes the pending files the state now counts; one that
// stays (another uid's, in a sticky dir) is named in the state and not
// counted again.
func removeMerged(d *safefs.Dir, names []string) {
	for _, n := range names {
		if st, err := d.Lstat(n); err == nil && st.IsRegular() {
			d.Remove(n, st)
		}
	}
}
