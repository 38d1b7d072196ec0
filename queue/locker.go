// locker.go owns naming who holds the queue's own locks (the token's
// flock, the resource directory's) where no gpu-hold holder explains it.
// Any member of a shared directory's group can take either lock with no
// ticket, and every hold then waits for it: gpu-hold queue shows it, and
// the waiter it holds up says so, with what can be known: the process
// /proc/locks names as the lock's taker (pid and start time), its uid, its
// command, and when it started (a lock does not say when it was taken).
// Where the taker no longer holds the lock, the processes whose open file
// holds it are named instead (lock_owner.go).
package queue

import (
	"fmt"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/termsafe"
)

// gpuHoldComm is what a gpu-hold process's name starts with: the test
// gpu-hold cancel makes before it signals a holder.
const gpuHoldComm = "gpu-hold"

// Locker is a process that holds one of the queue's own locks where no
// gpu-hold holder explains it: it has no ticket, a waiting one, or a
// granted ticket whose process is not a gpu-hold.
type Locker struct {
	Lock string `json:"lock"` // "token", "directory", "ticket counter", or two or three joined by "and"
	// Process is the lock's taker as /proc/locks names it. Gone: its
	// /proc cannot be read (it exited, and a process that inherited its
	// open file holds the lock now, or this reader's /proc hides it);
	// Start is then 0 and the fields below are empty.
	Process proc.Ident `json:"process"`
	Gone    bool       `json:"gone,omitempty"`
	// TakenBy is the pid /proc/locks names as the lock's taker when that
	// process does not hold it, and Process does, through an open file
	// of the taker's (inherited, or passed): the taker exited, or its pid
	// names another process now. 0: Process took it.
	TakenBy int       `json:"taken_by,omitempty"`
	UID     int       `json:"uid"` // its effective uid; -1: unknown
	Comm    string    `json:"comm,omitempty"`
	Cmd     []string  `json:"cmd,omitempty"`    // its argv as /proc shows it: its own text
	Started time.Time `json:"started,omitzero"` // when the process started
	// Ticket is a live ticket that names the process (0: none); Granted,
	// that the ticket says it holds the token.
	Ticket  uint64 `json:"ticket,omitempty"`
	Granted bool   `json:"granted,omitempty"`
	// Seen is when the waiter that reports it first saw it hold the lock
	// (zero in a Status).
	Seen time.Time `json:"seen,omitzero"`
}

// describeLocker reads what can be known of pid, the taker of locks, and
// the live ticket of s (may be nil) that names it.
func describeLocker(pid int, locks lockSet, s *snapshot) Locker {
	l := Locker{Lock: locks.String(), Process: proc.Ident{PID: pid}, UID: -1}
	st, err := proc.ReadStat(pid)
	if err != nil || st.Dead() {
		l.Gone = true
		return l
	}
	l.Process, l.Comm = st.Ident, st.Comm
	l.Cmd = proc.Cmdline(pid, 32, 256)
	l.Started = st.Ident.Started(proc.BootToWall())
	if uid, err := proc.EUIDOf(st.Ident); err == nil {
		l.UID = uid
	}
	if s != nil {
		for _, e := range s.tickets {
			if e.live && !e.unprobed && here(&e) && e.Holder == st.Ident && (l.Ticket == 0 || e.granted()) {
				l.Ticket, l.Granted = e.Seq, e.granted()
			}
		}
	}
	return l
}

// describeTaken is describeLocker of a holder that holds locks for the
// taker takenBy (0: itself; unseenTaker: pid is the taker, and does not
// hold them).
func describeTaken(pid int, locks lockSet, takenBy int, s *snapshot) Locker {
	if takenBy == unseenTaker {
		return Locker{Lock: locks.String(), Process: proc.Ident{PID: pid}, UID: -1, Gone: true}
	}
	l := describeLocker(pid, locks, s)
	l.TakenBy = takenBy
	return l
}

// GPUHold reports whether the process is named as a gpu-hold is.
func (l Locker) GPUHold() bool { return strings.HasPrefix(l.Comm, gpuHoldComm) }

// same reports whether l and o name the same process holding the same locks.
func (l *Locker) same(o *Locker) bool {
	return l != nil && o != nil && l.Process == o.Process && l.Lock == o.Lock && l.Ticket == o.Ticket
}

// Command is the process's command line for messages: its own text, with
// control characters shown, bounded.
func (l Locker) Command() string {
	c := strings.Join(l.Cmd, " ")
	if c == "" {
		c = "[" + l.Comm + "]"
	}
	if r := []rune(c); len(r) > 120 {
		c = string(r[:119]) + "…"
	}
	return termsafe.Text(c)
}

// Describe names the process: "pid 1234 (bob: python x.py; running since
// 10:02:03)".
func (l Locker) Describe() string {
	if l.Gone {
		return fmt.Sprintf("pid %d (as /proc/locks names the lock's taker; it holds the lock through no fd this reader can see: it exited, or its pid names another process now, and a process that inherited or was passed its open file holds the lock)", l.Process.PID)
	}
	s := fmt.Sprintf("pid %d (%s: %s; running since %s)", l.Process.PID, UserName(l.UID), l.Command(), stamp(l.Started))
	if l.TakenBy != 0 {
		s += fmt.Sprintf(", through an open file the lock's taker, pid %d, left it (that process exited, or its pid names another process now)", l.TakenBy)
	}
	return s
}

// Why says what the process is to the queue, as a sentence.
func (l Locker) Why() string {
	switch {
	case l.Granted:
		return fmt.Sprintf("It holds granted ticket %d, of its own user's writing, but it is not a gpu-hold (its name is %s): no max hold ends it, nothing tears down what it started, and gpu-hold cancel does not signal it", l.Ticket, termsafe.Text(l.Comm))
	case l.Ticket != 0:
		return fmt.Sprintf("It holds waiting ticket %d, whose turn has not come: it took the lock outside the queue", l.Ticket)
	case l.Gone:
		return "No ticket names it"
	case l.GPUHold():
		return "It is a gpu-hold that holds no ticket: one releasing the token, or one whose ticket or token file was removed (by its payload, say)"
	}
	return "It holds no ticket: it took the lock outside gpu-hold's queue"
}

// Remedy says who can end the wait for it.
func (l Locker) Remedy() string {
	switch {
	case l.Gone:
		return "find the process that has the queue's token or directory open (fuser, lsof; as root, gpu-hold queue names it) and ask its owner or an admin to end it"
	case l.GPUHold() && !l.Granted:
		return fmt.Sprintf("it lets go when that hold ends; its owner (%s) or an admin can end pid %d sooner", UserName(l.UID), l.Process.PID)
	}
	return fmt.Sprintf("only its owner (%s) or an admin can end it (pid %d); gpu-hold cancel cannot, since no gpu-hold runs it", UserName(l.UID), l.Process.PID)
}

// Summary is one short line for a status line: what blocks, by whom.
func (l Locker) Summary() string {
	what := "with no ticket"
	switch {
	case l.Granted:
		what = "not a gpu-hold, on granted ticket " + strconv.FormatUint(l.Ticket, 10)
	case l.Ticket != 0:
		what = "out of turn (its ticket " + strconv.FormatUint(l.Ticket, 10) + " waits)"
	}
	s := fmt.Sprintf("%s locked by pid %d", l.Lock, l.Process.PID)
	if !l.Gone {
		s += fmt.Sprintf(" (%s: %s)", UserName(l.UID), l.Command())
	}
	if l.TakenBy != 0 {
		s += fmt.Sprintf(" through pid %d's open file", l.TakenBy)
	}
	s += " " + what
	if !l.Seen.IsZero() {
		s += ", seen since " + stamp(l.Seen)
	}
	return s
}

// lockers lists the processes that hold the queue's own locks but the
// holder's gpu-hold, by pid; nil when /proc/locks cannot be read.
func (s *snapshot) lockers(q *dirQueue, holder *entry) []Locker {
	pids, takenBy := q.lockOwners(s.lockHolders(q))
	var out []Locker
	for _, pid := range sortedPids(pids) {
		l := describeTaken(pid, pids[pid], takenBy[pid], s)
		if holder != nil && l.Process == holder.Holder && l.GPUHold() || l.Lock == lockSeq.String() && l.GPUHold() {
			continue // the holder, or a hold taking a ticket
		}
		out = append(out, l)
	}
	return out
}

// lockerOf names the process that holds the lock in want (the first, by
// pid, where several do); nil when none can be named.
func (q *dirQueue) lockerOf(want lockSet, s *snapshot) *Locker {
	pids, takenBy := q.lockOwners(q.lockHolders())
	for _, pid := range sortedPids(pids) {
		if pids[pid]&want != 0 {
			l := describeTaken(pid, pids[pid], takenBy[pid], s)
			return &l
		}
	}
	return nil
}

func sortedPids(pids map[int]lockSet) []int {
	out := make([]int, 0, len(pids))
	for pid := range pids {
		out = append(out, pid)
	}
	slices.Sort(out)
	return out
}

// UserName names uid for messages: its login name, else its number.
func UserName(uid int) string {
	if uid < 0 {
		return "unknown user"
	}
	n := strconv.Itoa(uid)
	if u, err := user.LookupId(n); err == nil {
		return termsafe.Text(u.Username)
	}
	return "uid " + n
}

// stamp prints a wall time for messages: the time of day, with the date
// when it is not today's.
func stamp(t time.Time) string {
	if t.Format(time.DateOnly) == time.Now().Format(time.DateOnly) {
		return t.Format(time.TimeOnly)
	}
	return t.Format(time.DateTime)
}
