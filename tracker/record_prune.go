// record_prune.go owns the retention of a records directory: finished
// records beyond a count or older than an age are removed; a record still
// being written, or one whose holder died before it was reaped, is kept.
package tracker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// PruneRecords removes finished records (*.jsonl whose last line is an end
// line) from dir: those beyond the keep newest (keep <= 0: no count limit),
// and any older than maxAge (maxAge <= 0: no age limit). A record that is
// locked (its writer lives) or unfinished (its holder died and no reaper
// closed it yet) is never removed: it is what a reaper needs. Only the
// records that would go are opened, so a hold pays little for a full
// directory. A missing dir is not an error.
func PruneRecords(dir string, keep int, maxAge time.Duration) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("cannot list records in %s: %v", dir, err)
	}
	type rec struct {
		path string
		mod  time.Time
	}
	var all []rec
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".jsonl") {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		all = append(all, rec{filepath.Join(dir, e.Name()), info.ModTime()})
	}
	slices.SortFunc(all, func(a, b rec) int { return b.mod.Compare(a.mod) }) // newest first
	now := time.Now()
	var errs []error
	for i, r := range all {
		if (keep <= 0 || i < keep) && (maxAge <= 0 || now.Sub(r.mod) <= maxAge) {
			continue
		}
		if finished, err := recordFinished(r.path); err != nil || !finished {
			continue
		}
		if err := os.Remove(r.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("pruning records in %s: %w", dir, errors.Join(errs...))
	}
	return nil
}

// recordFinished reports whether the record at path is unlocked and ends
// with an end line.
func recordFinished(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
		return false, nil // a live writer holds it
	}
	defer unix.Flock(int(f.Fd()), unix.LOCK_UN)
	st, err := f.Stat()
	if err != nil {
		return false, err
	}
	const tailLen = 64 << 10
	off := max(st.Size()-tailLen, 0)
	buf := make([]byte, st.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	buf = bytes.TrimRight(buf, "\n")
	if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
		buf = buf[i+1:]
	}
	var head lineHead
	if json.Unmarshal(buf, &head) != nil {
		return false, nil
	}
	return head.Type == lineEnd, nil
}
