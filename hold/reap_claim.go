// reap_claim.go owns what a reap believes of a dead holder: a ticket, its
// record and the cgroup they name are files other users can write, so each
// is believed only from the writer entitled to it (the ticket's owner, and
// root for what only root makes), and never names a target by itself: the
// kernel, acting with the dead holder's authority, has the last word.
package hold

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

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
	cgroup string     // the payload's cgroup, checked to be the holder's
	record bool       // the record is the holder's own: the reap is appended to it
}

// believe reads d's record and cgroup as far as they can be trusted.
func believe(d queue.Ticket, log zerolog.Logger) claim {
	c := claim{Claim: tracker.Claim{HoldID: d.HoldID, Holder: d.Holder, UID: d.UID, PinOK: d.UID == 0}}
	if d.Record == "" {
		return c
	}
	rec, err := record.ReadRecordIf(d.Record, func(f safefs.Info) string { return untrustedRecord(f, d.UID) })
	var untrusted *record.UntrustedError
	switch {
	case errors.As(err, &untrusted):
		log.Warn().Str("record", d.Record).Msgf("not believing the dead holder's record: %s; ending its pinned lineage and marked processes only", untrusted.Why)
		return c
	case err != nil:
		log.Warn().Err(err).Msg("cannot read the dead holder's record; ending its pinned lineage and marked processes only")
		return c
	}
	if rec.Hold.ID != d.HoldID || rec.Hold.Holder != d.Holder {
		log.Error().Str("record", d.Record).Msg("the dead holder's record is not its own (hold id or holder differ): ignoring it")
		return c
	}
	c.record, c.IDs = true, rec.Live
	if rec.Hold.Payload != nil {
		// The group is ended only while its leader still holds the number
		// (see teardown.groupIsOurs).
		c.pgid, c.root = rec.Hold.PGID, *rec.Hold.Payload
	}
	if cg := rec.Hold.Cgroup; cg != "" {
		if why := untrustedCgroup(cg, d.HoldID, d.UID); why != "" {
			log.Error().Str("cgroup", cg).Msgf("ignoring the cgroup the dead holder's record names: %s", why)
		} else {
			c.cgroup = cg
		}
	}
	return c
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

// untrustedCgroup says why path cannot be the cgroup gpu-hold made for
// hold id under uid: "" when it is gpu-hold-<id> inside the cgroup v2 mount
// and a directory that uid owns (root's for a root hold: a user's ticket
// never reaches the cgroup of a root hold, live or dead).
func untrustedCgroup(path, id string, uid int) string {
	mnt := cgroup.Mount()
	clean := filepath.Clean(path)
	if mnt == "" || id == "" || filepath.Base(clean) != "gpu-hold-"+id || !strings.HasPrefix(clean, filepath.Clean(mnt)+"/") {
		return "gpu-hold did not make it for this hold"
	}
	var st unix.Stat_t
	if err := unix.Lstat(clean, &st); err != nil {
		return err.Error()
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || int(st.Uid) != uid {
		return fmt.Sprintf("it belongs to uid %d, not to the holder's uid %d", st.Uid, uid)
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
