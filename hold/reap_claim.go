// reap_claim.go owns what a reap believes of a dead holder: a ticket and
// its record are files other users can write, so each is believed only
// from the writer entitled to it (the ticket's owner, and root for what
// only root makes), and never names a target by itself; its cgroup is
// found by its hold id in the kernel's tree. The kernel, acting with the
// dead holder's authority, has the last word.
package hold

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/rs/zerolog"

	"github.com/gpu-hold/gpu-hold/internal/cgroup"
	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/record"
	"github.com/gpu-hold/gpu-hold/internal/safefs"
	"github.com/gpu-hold/gpu-hold/queue"
	"github.com/gpu-hold/gpu-hold/tracker"
)

// claim is what a reap may act on for dead holder d.
type claim struct {
	tracker.Claim
	pgid   int        // the payload's group, while its leader holds the number
	root   proc.Ident // the payload's process, the group's leader
	cgroup string     // the payload's cgroup, found by the hold id (holderCgroup)
	record string     // the holder's own record, "" when none is: the reap is appended to it
}

// believe reads d's record as far as it can be trusted, and finds d's
// cgroup by its hold id.
func believe(d queue.Ticket, log zerolog.Logger) claim {
	c := claim{Claim: tracker.Claim{HoldID: d.HoldID, Holder: d.Holder, UID: d.UID, PinOK: d.UID == 0}}
	rec, path, why := holderRecord(d)
	switch {
	case rec == nil && d.Record != "":
		log.Warn().Str("record", d.Record).Msgf("not believing the dead holder's record: %s; ending its pinned lineage, its cgroup and its marked processes only", why)
	case rec != nil && path != d.Record:
		log.Warn().Str("record", d.Record).Str("own_record", path).Msgf("not believing the record the dead holder's ticket names (%s): going by the record the holder made beside it", why)
	}
	if rec != nil {
		c.record, c.IDs = path, rec.Live
		if rec.Hold.Payload != nil {
			// The group is ended only while its leader still holds the
			// number (see teardown.groupIsOurs).
			c.pgid, c.root = rec.Hold.PGID, *rec.Hold.Payload
		}
	}
	c.cgroup = holderCgroup(d, rec, log)
	return c
}

// holderRecord reads the dead holder's own record and says where it was:
// the one its ticket names or, when that one is not the holder's (someone
// who read the waiting ticket made a file there first), the one the holder
// made under a fresh name beside it (record.FreshRecordName). A record is
// believed only when it is the holder's uid's file, only its, naming the
// same hold and holder; why says why the ticket's was not.
func holderRecord(d queue.Ticket) (rec *record.Record, path, why string) {
	if d.Record == "" {
		return nil, "", "its ticket names no record"
	}
	if rec, why = readHolderRecord(d, d.Record); rec != nil {
		return rec, d.Record, ""
	}
	if rec, path = freshRecord(d); rec != nil {
		return rec, path, why
	}
	return nil, "", why
}

// readHolderRecord reads the record at path when it is d's own.
func readHolderRecord(d queue.Ticket, path string) (*record.Record, string) {
	rec, err := record.ReadRecordIf(path, func(f safefs.Info) string { return untrustedRecord(f, d.UID) })
	var untrusted *record.UntrustedError
	switch {
	case errors.As(err, &untrusted):
		return nil, untrusted.Why
	case err != nil:
		return nil, "it cannot be read: " + err.Error()
	case rec.Hold.ID != d.HoldID || rec.Hold.Holder != d.Holder:
		return nil, "it is not its own (hold id or holder differ)"
	}
	return rec, ""
}

// freshTries bounds the fresh-named candidates of d's uid a reap reads.
const freshTries = 8

// freshRecord finds the record d's holder made under a fresh name beside
// the records dir's usual one, which its ticket names. Anyone may make
// names there; only d's uid's files are read.
func freshRecord(d queue.Ticket) (*record.Record, string) {
	if d.HoldID == "" || filepath.Base(d.Record) != filepath.Base(record.RecordPath("", d.HoldID)) {
		return nil, "" // --dump: a hold never renames it
	}
	for _, p := range record.FreshRecordPaths(d.Record, d.HoldID, d.UID, freshTries) {
		if rec, _ := readHolderRecord(d, p); rec != nil {
			return rec, p
		}
	}
	return nil, ""
}

// holderCgroup is the dead holder's cgroup, found by its hold id in the
// kernel's tree (cgroup.Find: gpu-hold-<id>, owned by the holder's uid,
// under directories only root or that uid made), never named by a file
// another user could have written: a planted or missing record hides
// nothing. A user's ticket never reaches a root hold's cgroup (its
// owner), live or dead. Where several carry the name (the holder's user
// made more), the one its own record names, else the first with a process
// in it, is ended.
func holderCgroup(d queue.Ticket, rec *record.Record, log zerolog.Logger) string {
	paths, cut := cgroup.Find(d.HoldID, d.UID)
	if cut {
		log.Warn().Msg("the cgroup hierarchy is larger than a reap walks: the dead holder's cgroup may not be found")
	}
	switch len(paths) {
	case 0:
		return ""
	case 1:
		return paths[0]
	}
	log.Warn().Strs("cgroups", paths).Msg("several cgroups carry the dead holder's hold id and belong to its uid: ending the one its record names, else the first with a process in it")
	if rec != nil && slices.Contains(paths, filepath.Clean(rec.Hold.Cgroup)) {
		return filepath.Clean(rec.Hold.Cgroup)
	}
	for _, p := range paths {
		if cgroup.Populated(p) {
			return p
		}
	}
	return paths[0]
}

// alive lists what c's record names that still runs, its payload's
// process among them, born since granted (zero: whenever): the record is
// its user's to write, but a lineage is born after its grant, and the
// kernel's account of a ticket's grant is its file's ctime, which no user
// can set back (queue.Ticket.Published). A record naming older processes
// names strangers.
func (c claim) alive(granted time.Time) []proc.Ident {
	boot := proc.BootToWall()
	var out []proc.Ident
	for _, id := range slices.Concat(c.IDs, []proc.Ident{c.root}) {
		if id.PID <= 0 || !proc.Alive(id) {
			continue
		}
		if !granted.IsZero() && id.Started(boot).Before(granted.Add(-startSlack)) {
			continue
		}
		out = append(out, id)
	}
	return out
}

// startSlack covers a start time's tick (10 ms) and the error of its
// conversion to wall time.
const startSlack = 50 * time.Millisecond

// untrustedRecord says why the record file f cannot be the holder's own
// account (uid's): "" when it is uid's, with one link, and nobody else may
// write it. (ReadRecord opened it as a regular file, following no link.)
func untrustedRecord(f safefs.Info, uid int) string {
	switch {
	case int(f.UID) != uid:
		return fmt.Sprintf("it belongs to uid %d, not to the holder's uid %d", f.UID, uid)
	case f.WritableByOthers():
		return fmt.Sprintf("others may write it (mode %04o)", f.Perm())
	case f.Nlink != 1:
		return fmt.Sprintf("it has %d links", f.Nlink)
	}
	return ""
}

// evidence reports whether a process the kernel would not let the reap
// signal is verifiably the dead holder's lineage, so that the reap must not
// be called done: it carries the hold's id in its environment, or it is in
// the holder's cgroup. Anything else a forged record or group named is not
// the holder's to have ended.
func (c *claim) evidence(st proc.Stat) bool {
	if c.HoldID != "" && tracker.CarriesHoldID(st.PID, c.HoldID) {
		return true
	}
	cg := cgroup.Open(c.cgroup)
	if cg == nil {
		return false // none, or already removed: nobody is in it
	}
	for _, pid := range cg.PIDs() {
		if pid == st.PID {
			return true
		}
	}
	return false
}
