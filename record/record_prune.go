// record_prune.go owns the retention of a records directory: finished
// records beyond a count or older than an age are removed; a record still
// being written, or one whose holder died before it was reaped, is kept;
// another user's record, or anything but a regular file, is never touched.
package record

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/safefs"
)

// PruneRecords removes finished records (*.jsonl whose last line is an end
// line) from dir: those beyond the keep newest (keep <= 0: no count limit),
// and any older than maxAge (maxAge <= 0: no age limit). A record that is
// locked (its writer lives) or unfinished (its holder died and no reaper
// closed it yet) is never removed: it is what a reaper needs. Only the
// records that would go are opened, so a hold pays little for a full
// directory. A missing dir is not an error; dir itself is never followed
// when it is a symlink (see PruneRecordsAt for what is removed).
func PruneRecords(dir string, keep int, maxAge time.Duration) error {
	d, err := safefs.OpenDirNoFollow(dir)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		var nr *safefs.NotRegularError
		if errors.As(err, &nr) {
			return fmt.Errorf("records dir %s is %s owned by uid %d (never followed, nothing pruned): remove it; an admin can recreate it with install -d -m %o -g GROUP %s", dir, nr.Info.Kind(), nr.Info.UID, RecordsDirMode, dir)
		}
		return fmt.Errorf("cannot open records dir %s to prune it: %v", dir, err)
	}
	defer d.Close()
	return PruneRecordsAt(d, keep, maxAge)
}

// prunable is a record PruneRecordsAt may remove.
type prunable struct {
	name string
	st   safefs.Info
}

// PruneRecordsAt is PruneRecords in an open records dir. It removes only
// regular files named like records and owned by this process's euid (root
// may prune any): another user's record is theirs to keep. Each is
// unlinked relative to d, and only while it is still the file checked.
func PruneRecordsAt(d *safefs.Dir, keep int, maxAge time.Duration) error {
	all, err := prunables(d)
	if err != nil {
		return err
	}
	slices.SortFunc(all, func(a, b prunable) int { return b.st.ModTime.Compare(a.st.ModTime) }) // newest first
	now := time.Now()
	var errs []error
	for i, r := range all {
		if (keep <= 0 || i < keep) && (maxAge <= 0 || now.Sub(r.st.ModTime) <= maxAge) {
			continue
		}
		if finished, err := recordFinished(d, r); err != nil || !finished {
			continue
		}
		if err := d.Remove(r.name, r.st); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("pruning records in %s: %w", d.Path(), errors.Join(errs...))
	}
	return nil
}

// prunables lists d's records this process may prune.
func prunables(d *safefs.Dir) ([]prunable, error) {
	names, err := d.Names()
	if err != nil {
		return nil, fmt.Errorf("cannot list records in %s: %v", d.Path(), err)
	}
	euid := geteuid()
	var all []prunable
	for _, n := range names {
		if !strings.HasSuffix(n, ".jsonl") || strings.HasPrefix(n, ".") {
			continue
		}
		st, err := d.Lstat(n)
		if err != nil || !st.IsRegular() || (euid != 0 && int(st.UID) != euid) {
			continue // removed meanwhile, planted, or another user's
		}
		all = append(all, prunable{n, st})
	}
	return all, nil
}

// recordFinished reports whether the record r is still the file listed,
// unlocked, and ends with an end line.
func recordFinished(d *safefs.Dir, r prunable) (bool, error) {
	f, st, err := d.Open(r.name, unix.O_RDONLY)
	if err != nil {
		return false, err
	}
	defer f.Close()
	if !st.Same(r.st) {
		return false, nil
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
		return false, nil // a live writer holds it
	}
	defer unix.Flock(int(f.Fd()), unix.LOCK_UN)
	const tailLen = 64 << 10
	off := max(st.Size-tailLen, 0)
	buf := make([]byte, st.Size-off)
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
