// pending.go owns a hold's counts on their way into the state: each hold
// first writes a pending file of its own (a fresh name, replaced
// atomically: no lock needed), then whoever holds the metrics lock adds
// every pending file there to the state. A hold that cannot get the lock
// in time loses nothing: its file waits for the next merge.
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
const maxMerge = 1000

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
// A pending file that cannot be read is reported and left alone.
func mergePending(d *safefs.Dir, base string, st *metricsState) error {
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
	var bad []error
	for _, n := range names {
		switch {
		case !isPending(base, n):
		case added[n]:
			merged = append(merged, n) // added before: only its removal is owed
		case len(merged) < maxMerge:
			m, err := readPending(d, n)
			if err != nil {
				bad = append(bad, err)
				continue
			}
			st.add(m)
			merged = append(merged, n)
		}
	}
	st.Merged = merged
	return errors.Join(bad...)
}

// readPending reads one pending file.
func readPending(d *safefs.Dir, name string) (Hold, error) {
	var m Hold
	data, _, err := d.ReadFile(name, maxPendingLen)
	if err != nil {
		return m, fmt.Errorf("pending metrics %s not counted: %v", d.Join(name), err)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return m, fmt.Errorf("pending metrics %s is corrupt (%v) and not counted: remove it", d.Join(name), err)
	}
	return m, nil
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
