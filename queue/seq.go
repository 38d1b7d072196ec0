// seq.go owns taking a ticket: the sequence number, assigned under a flock
// on the counter file <dir>/<resource>/seq as max(counter, highest ticket
// present)+1, and the ticket file t.<20-digit seq>, published already
// locked and written (see publish) and never overwritten (RENAME_NOREPLACE).
package queue

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/proc"
)

// The counter and every ticket name are written by users of the queue, so
// a sequence number is believed only up to a ceiling that no queue can have
// passed yet: one number per microsecond since 2020 (at least 10^12), plus
// a second's worth. A planted maximal number is then a name to skip, not
// a counter that runs out or wraps past every waiter; numbers taken from a
// counter pushed to the ceiling still grow with the clock.
const (
	seqFloor = 1_000_000_000_000
	seqSlack = 1_000_000
)

var seqEpoch = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

// plausibleSeq reports whether seq is below the ceiling of now.
func plausibleSeq(seq uint64) bool {
	ceiling := uint64(max(seqFloor, time.Since(seqEpoch).Microseconds())) + seqSlack
	return seq > 0 && seq <= ceiling
}

// awaitPlausible waits, briefly, for the ceiling to pass seq: a ticket
// planted at the ceiling is followed by a number the clock reaches at once.
func awaitPlausible(seq uint64) bool {
	for deadline := time.Now().Add(2 * time.Second); !plausibleSeq(seq); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// Enqueue takes a ticket. UID, Resource, Created and Seq are set by the
// queue; Holder defaults to the calling process and Host to its host name.
func (q *dirQueue) Enqueue(t Ticket) (Waiter, error) {
	t, err := q.fill(t)
	if err != nil {
		return nil, err
	}
	e, fd, below, err := q.newTicket(t)
	if err != nil {
		return nil, err
	}
	return &waiter{q: q, e: e, fd: fd, below: below}, nil
}

// fill sets the fields the queue owns.
func (q *dirQueue) fill(t Ticket) (Ticket, error) {
	t.Resource = q.resource
	t.UID = q.euid // the ticket file's owner: readers check they agree
	t.Created = time.Now()
	t.Granted = time.Time{}
	if t.Holder.PID == 0 {
		self, err := proc.Self()
		if err != nil {
			return t, fmt.Errorf("cannot read this process's identity: %v", err)
		}
		t.Holder = self
	}
	if t.Host == "" {
		t.Host, _ = os.Hostname()
	}
	t.PidNS = ownPidNS()
	// Keep tickets far below what readers accept (maxFileLen): the queue
	// shows a command, the record keeps it whole.
	t.Label = clip(t.Label, 256)
	n := 0
	for i, a := range t.Cmd {
		if n += len(a); n > 4096 {
			t.Cmd = append(t.Cmd[:i:i], clip(a, max(0, 4096-(n-len(a)))), fmt.Sprintf("(%d more arguments)", len(t.Cmd)-i-1))
			break
		}
	}
	if len(t.HoldID) > 1024 || len(t.Record) > 4096 || len(t.Host) > 1024 {
		return t, fmt.Errorf("hold id, record path or host name too long for a ticket")
	}
	return t, nil
}

// clip shortens s to at most n bytes, on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// newTicket assigns the next seq and publishes the ticket file, which the
// returned fd keeps locked. below is how many tickets were in the queue
// then: none can come ahead of ours later, so it bounds those ahead of it
// for ever.
func (q *dirQueue) newTicket(t Ticket) (e entry, fd, below int, err error) {
	ctr, writable, err := q.lockCounter()
	if err != nil {
		return entry{}, -1, 0, err
	}
	defer unix.Close(ctr) // drops the lock
	names, err := q.names()
	if err != nil {
		return entry{}, -1, 0, err
	}
	counter, believed := q.readCounter(ctr)
	seq := counter
	for _, n := range names {
		if s, rest, ok := parseSeq(n, ticketPrefix); ok && rest == "" {
			seq, below = max(seq, s), below+1
		}
	}
	if writable && believed && seq > counter {
		// Only a counter rewritten by someone goes below a ticket present.
		var st unix.Stat_t
		unix.Fstat(ctr, &st)
		q.warnf(fmt.Sprintf("seqback@%d:%d", st.Ino, counter), "ticket counter %s/%s (uid %d) says %d, below ticket %d present: someone rewrote it; numbering continues from the highest ticket present", q.path, seqName, st.Uid, counter, seq)
	}
	for range 1000 {
		seq++
		if !awaitPlausible(seq) {
			return entry{}, -1, 0, fmt.Errorf("ticket number %d in %s is beyond what any queue can have reached (a planted ticket or counter, or the clock went back): ask an admin to check %s/%s and the t.* files", seq, q.path, q.path, seqName)
		}
		t.Seq = seq
		b, _ := json.Marshal(t)
		name := ticketName(seq)
		fd, st, err := q.publish(name, append(b, '\n'), true)
		if errors.Is(err, unix.EEXIST) {
			below++ // someone made this name outside the counter: take the next
			continue
		}
		if err != nil {
			return entry{}, -1, 0, err
		}
		if writable {
			// Fixed width, one write: never a torn or shorter number.
			unix.Pwrite(ctr, []byte(fmt.Sprintf("%0*d\n", seqDigits, seq)), 0)
		}
		return entry{Ticket: t, name: name, dev: st.Dev, ino: st.Ino, live: true}, fd, below, nil
	}
	return entry{}, -1, 0, fmt.Errorf("cannot find a free ticket name in %s after 1000 tries: remove stray t.* files", q.path)
}

// lockCounter opens and locks the counter. When it cannot be written (it
// belongs to another user and is not group-writable), numbering continues
// from the highest ticket present, and that is reported once.
func (q *dirQueue) lockCounter() (fd int, writable bool, err error) {
	fd, st, err := q.openShared(seqName, unix.O_RDWR, q.sharedMode())
	writable = err == nil
	if errors.Is(err, unix.EACCES) {
		fd, st, err = q.openShared(seqName, unix.O_RDONLY, q.sharedMode())
	}
	if err != nil {
		return -1, false, err
	}
	if writable && st.Nlink != 1 {
		// A hard link planted here would make us write someone else's file.
		q.warnf(fmt.Sprintf("seq@%d", st.Ino), "%s/%s has %d links (planted?); not writing it: ask an admin to remove it", q.path, seqName, st.Nlink)
		writable = false
	}
	if !writable {
		q.warnf(fmt.Sprintf("seqro@%d", st.Ino), "%s/%s is not writable by uid %d (owner uid %d, mode %04o): ticket numbers continue from the highest ticket present; ask its owner to chmod g+w it", q.path, seqName, q.euid, st.Uid, st.Mode&0o7777)
	}
	// Held for microseconds by each enqueue; never wait for ever on a
	// stuck holder of the counter.
	deadline := time.Now().Add(counterWait)
	for wait := 50 * time.Microsecond; ; wait = min(2*wait, 10*time.Millisecond) {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return fd, writable, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) || time.Now().After(deadline) {
			unix.Close(fd)
			if lk := q.lockerOf(lockSeq, nil); lk != nil && errors.Is(err, unix.EWOULDBLOCK) {
				return -1, false, fmt.Errorf("cannot take a ticket: the ticket counter %s/%s has been locked for %v by %s. %s; no hold can queue until it lets go: %s", q.path, seqName, counterWait, lk.Describe(), lk.Why(), lk.Remedy())
			}
			return -1, false, fmt.Errorf("cannot lock the ticket counter %s/%s (held for %v by a process /proc/locks does not name, or %v): ask an admin to find it (fuser %s/%s)", q.path, seqName, counterWait, err, q.path, seqName)
		}
		time.Sleep(wait)
	}
}

// counterWait bounds an enqueue's wait for the counter's lock; a
// variable for the tests.
var counterWait = 10 * time.Second

// readCounter reads the counter; garbage is reported once and read as 0,
// not believed (the highest ticket present still keeps numbers increasing).
func (q *dirQueue) readCounter(fd int) (uint64, bool) {
	var buf [seqDigits + 1]byte
	n, _ := unix.Pread(fd, buf[:], 0)
	s := strings.TrimSpace(string(buf[:max(n, 0)]))
	if s == "" {
		return 0, false
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || v != 0 && !plausibleSeq(v) {
		var st unix.Stat_t
		unix.Fstat(fd, &st)
		q.warnf(fmt.Sprintf("seqval@%d:%s", st.Ino, s), "ticket counter %s/%s holds garbage (%.20q); numbering continues from the highest ticket present", q.path, seqName, s)
		return 0, false
	}
	return v, true
}
