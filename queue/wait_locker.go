// wait_locker.go owns what the waiter first in line does about a process
// that holds the queue's own locks where no gpu-hold holder explains it
// (locker.go): it watches it, shows it on the status line, and names it
// once in the log, with what can be done.
package queue

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/proc"
)

// lockerPatience is how long a lock held with no ticket is seen before it
// is named in the log: a holder that releases removes its ticket before
// it unlocks, so for a moment the lock of a hold that is leaving looks
// like one held with no ticket.
const lockerPatience = time.Second

// heldUpBy settles, at each look, what holds the token up: nothing while
// tickets are ahead; the holder's process, when it is not a gpu-hold;
// what take finds otherwise.
func (l *waitLoop) heldUpBy(ahead []entry, holder *Ticket) {
	switch {
	case len(ahead) > 0:
		l.locker = nil
	case holder != nil:
		l.locker = l.holderLocker(holder)
		l.report()
	}
}

// holderLocker is holder's process as a Locker when it is not a gpu-hold
// (a granted ticket its user wrote, naming a process of its own that
// holds the token), else nil; checked once per holder.
func (l *waitLoop) holderLocker(holder *Ticket) *Locker {
	if holder.Holder == l.checked {
		return l.checkedAs
	}
	l.checked, l.checkedAs = holder.Holder, nil
	// A gpu-hold's name is all a look after each hand-off reads.
	if st, ok := proc.LiveStat(holder.Holder); !ok || strings.HasPrefix(st.Comm, gpuHoldComm) {
		return nil
	}
	locks := l.snap.lockHolders(l.w.q)
	lk := describeLocker(holder.Holder.PID, locks[holder.Holder.PID], l.snap)
	if !lk.Gone && !lk.GPUHold() && lk.Process == holder.Holder {
		lk.Seen = time.Now()
		l.checkedAs = &lk
	}
	return l.checkedAs
}

// lockedBy names the process that holds the lock take could not get (the
// token's, or the directory's when the token's was free), keeping when it
// was first seen; nil when /proc/locks names none.
func (l *waitLoop) lockedBy() *Locker {
	want := lockToken
	if l.tok.dirBusy {
		want = lockDir
	}
	lk := l.w.q.lockerOf(want, l.snap)
	if lk != nil {
		lk.Seen = time.Now()
		if lk.same(l.locker) {
			lk.Seen = l.locker.Seen
		}
	}
	l.locker = lk
	l.report()
	return lk
}

// report names the locker in the log, once per process and lock: at once
// for a granted ticket's, after lockerPatience for one with no ticket.
func (l *waitLoop) report() {
	lk := l.locker
	if lk == nil || !lk.Granted && time.Since(lk.Seen) < lockerPatience {
		return
	}
	q := l.w.q
	q.warnf(fmt.Sprintf("locker@%s@%v@%d", lk.Lock, lk.Process, lk.Ticket), "%s", q.lockerMessage(lk, l.w.e.Seq))
}

// lockerMessage says what holds ticket seq up, why, and what can be done.
func (q *dirQueue) lockerMessage(lk *Locker, seq uint64) string {
	lock := "the token of " + q.path
	note := ""
	if lk.Lock == lockDir.String() {
		lock = "the queue directory " + q.path
		note = " gpu-hold's holders lock the directory with the token, so no hold takes the token while another process holds the directory's lock."
	}
	return fmt.Sprintf("%s is locked by %s, seen holding it since %s. %s.%s Ticket %d waits until it lets go: %s. To stop waiting: gpu-hold --dir %s cancel -r %s %d",
		lock, lk.Describe(), stamp(lk.Seen), lk.Why(), note, seq, lk.Remedy(), filepath.Dir(q.path), q.resource, seq)
}
