// scan.go owns reading the queue directory: every ticket with its validity
// and liveness (whether its owner still holds the ticket's lock), the reaped
// markers, and the problem files, which are reported once and skipped.
package queue

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/safefs"
)

const (
	ticketPrefix = "t."
	reapedPrefix = "reaped."
	seqDigits    = 20
	recordsName  = "records" // hold's records (record.RecordPath); not the queue's
)

func ticketName(seq uint64) string { return fmt.Sprintf("%s%0*d", ticketPrefix, seqDigits, seq) }

// parseSeq parses the 20-digit sequence number that follows prefix in name;
// rest is what follows the digits. A number no queue can have reached yet
// (see plausibleSeq) is not a sequence number: a planted name.
func parseSeq(name, prefix string) (seq uint64, rest string, ok bool) {
	s, found := strings.CutPrefix(name, prefix)
	if !found || len(s) < seqDigits {
		return 0, "", false
	}
	for _, c := range s[:seqDigits] {
		if c < '0' || c > '9' {
			return 0, "", false
		}
	}
	v, err := strconv.ParseUint(s[:seqDigits], 10, 64)
	if err != nil || !plausibleSeq(v) {
		return 0, "", false
	}
	return v, s[seqDigits:], true
}

// entry is a valid ticket file.
type entry struct {
	Ticket
	name     string
	dev, ino uint64
	ctime    unix.Timespec // of the file read: with dev and ino, its identity
	live     bool          // its lock is held and its holder alive (checkLock)
	// unprobed: a waiting ticket behind the scanning waiter, known from an
	// earlier read of the same file; its lock was not probed, and live is
	// assumed (so the cleanup leaves it alone).
	unprobed bool
}

func (e *entry) granted() bool { return !e.Granted.IsZero() }

// marker records that a dead holder's lineage was reaped, when its ticket
// (another user's file) could not be removed. It binds to the dead ticket's
// identity, so it cannot be planted ahead of time.
type marker struct {
	Seq      uint64     `json:"seq"`
	Holder   proc.Ident `json:"holder"`
	Created  time.Time  `json:"created"`
	ReapedBy int        `json:"reaped_by"`
	Reaped   time.Time  `json:"reaped"`
}

type markerFile struct {
	marker
	name     string
	dev, ino uint64
	uid      int // the file's owner: who wrote it, whatever it says
}

// counts reports whether the marker says e was reaped, and comes from a
// writer entitled to say so: root, or the dead holder's own user. Anyone
// else's marker would hide a dead holder whose lineage still runs.
func (m *markerFile) counts(e *entry) bool {
	return m.Seq == e.Seq && m.Holder == e.Holder && m.Created.Equal(e.Created) &&
		(m.uid == 0 || m.uid == e.UID)
}

// snapshot is one read of the directory.
type snapshot struct {
	tickets []entry // valid tickets by seq
	markers map[uint64][]markerFile
	temps   []string        // names of files being published
	notes   []uint64        // the seqs of the keeping notes (keeping.go)
	skipped []string        // problem files, reported
	locks   map[int]lockSet // the pids holding the queue's locks (lockHolders), read once
	read    bool            // locks was read (nil: /proc/locks cannot be)
}

// lockHolders is the pids that hold the token's or the directory's lock,
// read once per snapshot (a read of /proc/locks may sleep for an RCU grace
// period).
func (s *snapshot) lockHolders(q *dirQueue) map[int]lockSet {
	if !s.read {
		s.locks, s.read = q.lockHolders(), true
	}
	return s.locks
}

// names lists the directory.
func (q *dirQueue) names() ([]string, error) {
	fd, err := unix.Openat(q.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("cannot read queue dir %s: %v", q.path, err)
	}
	f := os.NewFile(uintptr(fd), q.path)
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("cannot read queue dir %s: %v", q.path, err)
	}
	return names, nil
}

// scan reads every file of the queue; it changes nothing.
func (q *dirQueue) scan() (*snapshot, error) { return q.scanFor(0) }

// scanFor is scan for the waiter of ticket me (0: none). A waiter's place
// depends on the tickets ahead of it and on the holder only, so a waiting
// ticket behind it whose file it has read before (a ticket's file never
// changes: a grant publishes a new file under the same name) is neither
// read nor probed again. A queue of hundreds costs the waiter first in
// line a stat per ticket behind it, not a read, a parse and a lock probe.
func (q *dirQueue) scanFor(me uint64) (*snapshot, error) {
	names, err := q.names()
	if err != nil {
		return nil, err
	}
	s := &snapshot{markers: map[uint64][]markerFile{}}
	listed := make(map[string]bool, len(names))
	for _, name := range names {
		if seq, rest, ok := parseSeq(name, ticketPrefix); ok && rest == "" {
			listed[name] = true
			if me != 0 && seq > me {
				if e, ok := q.seenWaiting(name); ok {
					s.tickets = append(s.tickets, e)
					continue
				}
			}
			if e, ok := q.readTicket(name, seq); ok {
				s.tickets = append(s.tickets, e)
				q.remember(e)
			} else if e.name != "" {
				s.skipped = append(s.skipped, name)
			}
			continue
		}
		if seq, rest, ok := parseSeq(name, reapedPrefix); ok && strings.HasPrefix(rest, ".") {
			if m, ok := q.readMarker(name, seq); ok {
				s.markers[seq] = append(s.markers[seq], m)
			} else {
				s.skipped = append(s.skipped, name)
			}
			continue
		}
		if seq, rest, ok := parseSeq(name, keepPrefix); ok && rest == "" {
			s.notes = append(s.notes, seq) // read only for a holder
			continue
		}
		var st unix.Stat_t
		switch {
		case name == tokenName || name == seqName:
		case strings.HasPrefix(name, tmpPrefix):
			s.temps = append(s.temps, name)
		case name == recordsName && unix.Fstatat(q.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR:
			// hold's records directory
		default:
			s.skipped = append(s.skipped, name)
			unix.Fstatat(q.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
			q.warnf(fmt.Sprintf("%s@%d", name, st.Ino), "ignoring %s/%s (%s of uid %d): not a gpu-hold file; remove it if nobody needs it", q.path, name, safefs.Kind(st.Mode), st.Uid)
		}
	}
	sort.Slice(s.tickets, func(i, j int) bool { return s.tickets[i].Seq < s.tickets[j].Seq })
	q.forget(listed)
	return s, nil
}

// remember keeps a waiting ticket's reading for scanFor.
func (q *dirQueue) remember(e entry) {
	if e.granted() {
		return
	}
	q.seenMu.Lock()
	defer q.seenMu.Unlock()
	if q.seen == nil {
		q.seen = map[string]entry{}
	}
	q.seen[e.name] = e
}

// seenWaiting returns the waiting ticket read before from the file that
// name is now, unprobed.
func (q *dirQueue) seenWaiting(name string) (entry, bool) {
	q.seenMu.Lock()
	e, ok := q.seen[name]
	q.seenMu.Unlock()
	if !ok {
		return entry{}, false
	}
	var st unix.Stat_t
	if unix.Fstatat(q.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Dev != e.dev || st.Ino != e.ino || st.Ctim != e.ctime {
		return entry{}, false
	}
	e.live, e.unprobed = true, true
	return e, true
}

// forget drops the readings of tickets no longer listed.
func (q *dirQueue) forget(listed map[string]bool) {
	q.seenMu.Lock()
	defer q.seenMu.Unlock()
	for name := range q.seen {
		if !listed[name] {
			delete(q.seen, name)
		}
	}
}

// readTicket reads and checks one ticket and probes its owner's lock. A
// ticket that vanished meanwhile returns a zero entry and false; a bad one
// is reported and returns an entry with only its name.
func (q *dirQueue) readTicket(name string, seq uint64) (entry, bool) {
	path := q.path + "/" + name
	fd, st, err := q.openRegular(name, unix.O_RDONLY)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, errChanged) {
			return entry{}, false
		}
		var nr *notRegular
		if errors.As(err, &nr) {
			q.warnf(fmt.Sprintf("%s@%d", name, st.Ino), "ignoring %s: it is %s of uid %d, not a ticket (never followed); remove it", path, safefs.Kind(st.Mode), st.Uid)
		} else {
			q.warnf(fmt.Sprintf("%s@%d", name, st.Ino), "ignoring ticket %s: cannot open it as uid %d (%v); its owner (uid %d) or an admin should remove it", path, q.euid, err, st.Uid)
		}
		return entry{name: name}, false
	}
	defer unix.Close(fd)
	bad := func(why string) (entry, bool) {
		q.warnf(fmt.Sprintf("%s@%d", name, st.Ino), "ignoring ticket %s (uid %d): %s; remove it if no gpu-hold process of uid %d owns it", path, st.Uid, why, st.Uid)
		return entry{name: name}, false
	}
	b, err := readAll(fd)
	switch {
	case err != nil:
		return bad(err.Error())
	case len(b) == 0:
		return bad("empty")
	}
	e := entry{name: name, dev: st.Dev, ino: st.Ino, ctime: st.Ctim}
	if err := json.Unmarshal(b, &e.Ticket); err != nil {
		return bad("not a ticket (" + err.Error() + ")")
	}
	e.Published = time.Unix(st.Ctim.Unix())
	switch {
	case e.Seq != seq:
		return bad(fmt.Sprintf("it says ticket %d", e.Seq))
	case e.Resource != q.resource:
		return bad(fmt.Sprintf("it is for resource %q", e.Resource))
	case e.UID != int(st.Uid):
		return bad(fmt.Sprintf("it claims uid %d but the file belongs to uid %d (forged?)", e.UID, st.Uid))
	case e.Holder.PID <= 0:
		return bad("it names no holder process")
	}
	live, err := lockedByOther(fd)
	if err != nil {
		q.warnf(fmt.Sprintf("flock@%d", st.Ino), "cannot probe the lock of %s (%v); counting it as alive", path, err)
	}
	e.live = live
	if live {
		if why, ok := q.checkLock(&e); !ok {
			return bad(why)
		}
	}
	return e, true
}

func (q *dirQueue) readMarker(name string, seq uint64) (markerFile, bool) {
	fd, st, err := q.openRegular(name, unix.O_RDONLY)
	if err != nil {
		if !errors.Is(err, unix.ENOENT) && !errors.Is(err, errChanged) {
			q.warnf(fmt.Sprintf("%s@%d", name, st.Ino), "ignoring %s/%s (%s of uid %d): not a valid reaped marker; remove it", q.path, name, safefs.Kind(st.Mode), st.Uid)
		}
		return markerFile{}, false
	}
	defer unix.Close(fd)
	m := markerFile{name: name, dev: st.Dev, ino: st.Ino, uid: int(st.Uid)}
	b, err := readAll(fd)
	if err == nil {
		err = json.Unmarshal(b, &m.marker)
	}
	if err != nil || m.Seq != seq {
		q.warnf(fmt.Sprintf("%s@%d", name, st.Ino), "ignoring %s/%s (uid %d): not a valid reaped marker; remove it", q.path, name, st.Uid)
		return markerFile{}, false
	}
	return m, true
}

// waitingAhead lists the live waiting tickets ahead of ticket seq, by seq.
func (s *snapshot) waitingAhead(seq uint64) (ahead []entry) {
	for i := range s.tickets {
		e := &s.tickets[i]
		if e.live && !e.granted() && e.Seq < seq {
			ahead = append(ahead, *e)
		}
	}
	return ahead
}

// holder is the live ticket that took the token: its process holds the
// token's lock or the directory's (the guard). A live ticket that says it
// was granted but whose process holds neither (a user's forged one) is
// nobody: believed, it would keep every waiter from the token for as long
// as its forger keeps the ticket locked.
func (s *snapshot) holder(q *dirQueue) *entry {
	var hs []*entry
	for i := range s.tickets {
		// A holder of another pid namespace: its pid cannot be matched.
		if e := &s.tickets[i]; e.live && e.granted() && here(e) {
			hs = append(hs, e)
		}
	}
	if len(hs) == 0 {
		return nil
	}
	pids := s.lockHolders(q)
	for _, e := range hs {
		if pids[e.Holder.PID]&holderLocks != 0 {
			return e
		}
	}
	return nil
}

// dead lists the holders that died without releasing and are not reaped.
func (s *snapshot) dead() []entry {
	var out []entry
	for _, e := range s.tickets {
		if !e.live && e.granted() && !s.reaped(&e) {
			out = append(out, e)
		}
	}
	return out
}

// dying lists the granted tickets but seq me's that are still locked by a
// holder that has begun to exit. A SIGKILLed holder closes its token
// before its granted ticket, so the successor that took the token can find
// that ticket still locked for a moment: it is a dead holder all the same.
// Only the token's holder may ask.
func (s *snapshot) dying(me uint64) []entry {
	var out []entry
	for _, e := range s.tickets {
		if e.live && e.granted() && e.Seq != me && !s.reaped(&e) {
			if st, err := proc.ReadStat(e.Holder.PID); err == nil && st.Start == e.Holder.Start && (st.Exiting() || st.Dead()) {
				out = append(out, e)
			}
		}
	}
	return out
}

// unheld lists the live granted tickets but seq me's, of this pid
// namespace, whose holder runs, not exiting, but holds no lock of the
// queue: a holder takes the token before its ticket says granted and
// removes its ticket before it lets the token go (a pool hold's device
// ticket too, on its device's queue; the pool ticket itself is never
// granted), so such a ticket holds nothing. Its process is not its gpu-hold: a payload that
// rewrote its own ticket to name a process of its own keeping it locked,
// then killed its gpu-hold (or a user's forgery naming its own process).
// /proc/locks is read only when there is such a ticket to ask about.
func (s *snapshot) unheld(q *dirQueue, me uint64) []entry {
	var out []entry
	for _, e := range s.tickets {
		if !e.live || e.unprobed || !e.granted() || e.Seq == me || !here(&e) || len(e.Devices) > 0 || s.reaped(&e) {
			continue
		}
		if st, err := proc.ReadStat(e.Holder.PID); err != nil || st.Start != e.Holder.Start || st.Exiting() || st.Dead() {
			continue // gone or dying: dead() or dying() has it
		}
		// Without /proc/locks nothing is known to hold nothing.
		if pids := s.lockHolders(q); pids != nil && pids[e.Holder.PID]&holderLocks == 0 {
			e.Unheld = true
			out = append(out, e)
		}
	}
	return out
}

// deadOrUnheld is every dead holder a reader outside the token sees: the
// dead and the unheld (what Status shows and a reap ends).
func (s *snapshot) deadOrUnheld(q *dirQueue) []entry {
	return slices.Concat(s.dead(), s.unheld(q, 0))
}

// deadWhileHeld is what the token's holder (seq me) is handed: the dead
// holders, the dying ones and the unheld ones, by seq.
func (s *snapshot) deadWhileHeld(q *dirQueue, me uint64) []entry {
	out := slices.Concat(s.dead(), s.dying(me), s.unheld(q, me))
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out
}

func (s *snapshot) reaped(e *entry) bool {
	for _, m := range s.markers[e.Seq] {
		if m.counts(e) {
			return true
		}
	}
	return false
}

// Status lists the holder, the live waiters in order, the unreaped dead
// holders, the processes that hold the queue's locks where no gpu-hold
// holder explains it, and the files that were skipped.
func (q *dirQueue) Status() (Status, error) {
	s, err := q.scan()
	if err != nil {
		return Status{}, err
	}
	st := Status{Resource: q.resource, Waiters: []Ticket{}, Skipped: s.skipped}
	h := s.holder(q)
	if h != nil {
		t := h.Ticket
		st.Holder = &t
	}
	if h != nil {
		st.Holder.Keeping = q.keepingOf(h)
	}
	st.Lockers = s.lockers(q, h)
	for _, e := range s.tickets {
		if e.live && !e.granted() {
			st.Waiters = append(st.Waiters, e.Ticket)
		}
	}
	for _, e := range s.deadOrUnheld(q) {
		st.Dead = append(st.Dead, e.Ticket)
	}
	return st, nil
}
