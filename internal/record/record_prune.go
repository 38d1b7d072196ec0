// record_prune.go owns the retention of a records directory: one owner's
// (or, for root, every owner's) finished records beyond a count or older
// than an age are removed; a record still being written, or one whose
// holder died before it was reaped, is kept; anything but a regular file
// is never touched.
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

	"github.com/gpu-hold/gpu-hold/internal/safefs"
)

// Retention bounds a records directory: the Keep newest finished records
// stay (Keep <= 0: no count limit), and finished records older than MaxAge
// go (MaxAge <= 0: no age limit).
type Retention struct {
	Keep   int
	MaxAge time.Duration
}

// EveryOwner, as the owner PruneRecords prunes, is every user: the fleet's
// retention, which only root applies.
const EveryOwner = -1

// PruneRecords removes owner's finished records (*.jsonl whose last line is
// an end line, owned by uid owner; EveryOwner: anyone's) from dir: those
// beyond ret.Keep newest of their owner's, and any older than ret.MaxAge.
// Keep counts each owner's records apart, EveryOwner's too: counted all
// together, any user's many records (real holds, or files planted with
// new times) would push every other user's out. A record
// that is locked (its writer lives) or unfinished (its holder died and no
// reaper closed it yet) is never removed: it is what a reaper needs. Only
// the records that would go are opened, so a hold pays little for a full
// directory. A missing dir is not an error; dir itself is never followed
// when it is a symlink (see PruneRecordsAt for what is removed).
func PruneRecords(dir string, owner int, ret Retention) error {
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
	return PruneRecordsAt(d, owner, ret)
}

// prunable is a record PruneRecordsAt may remove.
type prunable struct {
	name string
	st   safefs.Info
}

// PruneRecordsAt is PruneRecords in an open records dir. It removes only
// regular files named like records and owned by owner: a job's retention
// (owner its own uid, root's too) leaves another user's record to them;
// EveryOwner is refused but to root. Each is unlinked relative to d, and
// only while it is still the file checked.
func PruneRecordsAt(d *safefs.Dir, owner int, ret Retention) error {
	if owner == EveryOwner && geteuid() != 0 {
		return fmt.Errorf("pruning every user's records in %s as uid %d: only root applies the directory's retention", d.Path(), geteuid())
	}
	keep, maxAge := ret.Keep, ret.MaxAge
	all, err := prunables(d, owner)
	if err != nil {
		return err
	}
	slices.SortFunc(all, func(a, b prunable) int { return b.st.ModTime.Compare(a.st.ModTime) }) // newest first
	now := time.Now()
	newer := map[uint32]int{} // records of each owner seen so far: newer ones
	var errs []error
	for _, r := range all {
		i := newer[r.st.UID]
		newer[r.st.UID]++
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

// prunables lists d's records of owner (EveryOwner: all).
func prunables(d *safefs.Dir, owner int) ([]prunable, error) {
	names, err := d.Names()
	if err != nil {
		return nil, fmt.Errorf("cannot list records in %s: %v", d.Path(), err)
	}
	var all []prunable
	for _, n := range names {
		if !strings.HasSuffix(n, ".jsonl") || strings.HasPrefix(n, ".") {
			continue
		}
		st, err := d.Lstat(n)
		if err != nil || !st.IsRegular() || (owner != EveryOwner && int(st.UID) != owner) {
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
