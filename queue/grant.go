// grant.go owns the held token: the dead holders handed to the new holder
// (kept on disk until Reaped), Release, TakeDead for `gpu-hold reap`, and
// the tidying a new holder does of what dead processes left behind.
package queue

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

type grant struct {
	q    *dirQueue
	mu   sync.Mutex
	e    entry // our granted ticket
	fd   int   // holds its lock; -1 once released
	tok  *tokenLock
	dead []entry
	// detached: a ReapDead grant, which holds no token and no ticket.
	detached bool
	yield    *contention // a yielding holder's watch (yield.go)
	kept     [2]uint64   // dev, ino of our keeping note (keeping.go); 0: none
}

func (g *grant) Ticket() Ticket { return g.e.Ticket }

// Dead lists the holders that died without releasing, by seq.
func (g *grant) Dead() []Ticket {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]Ticket, len(g.dead))
	for i, e := range g.dead {
		out[i] = e.Ticket
	}
	return out
}

// Reaped records that dead's lineage was ended: its ticket is removed, or,
// when it is another user's file we may not remove, a reaped marker bound
// to its identity is written beside it.
func (g *grant) Reaped(dead Ticket) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.fd < 0 && !g.detached {
		return fmt.Errorf("Reaped(ticket %d) after Release: the token is no longer held", dead.Seq)
	}
	for i, e := range g.dead {
		if e.Seq != dead.Seq || e.Holder != dead.Holder {
			continue
		}
		if err := g.q.removeIfSame(e.name, e.dev, e.ino); err != nil {
			if !errors.Is(err, unix.EPERM) && !errors.Is(err, unix.EACCES) {
				return fmt.Errorf("cannot remove dead holder's ticket %s/%s: %v", g.q.path, e.name, err)
			}
			if err := g.q.writeMarker(&e); err != nil {
				return err
			}
		}
		g.dead = append(g.dead[:i], g.dead[i+1:]...)
		return nil
	}
	return fmt.Errorf("ticket %d is not a dead holder handed to this grant", dead.Seq)
}

func (q *dirQueue) writeMarker(e *entry) error {
	m := marker{Seq: e.Seq, Holder: e.Holder, Created: e.Created, ReapedBy: q.euid, Reaped: time.Now()}
	b, _ := json.Marshal(m)
	var rnd [4]byte
	rand.Read(rnd[:])
	name := fmt.Sprintf("%s%0*d.%s", reapedPrefix, seqDigits, e.Seq, hex.EncodeToString(rnd[:]))
	fd, _, err := q.publish(name, append(b, '\n'), true)
	if err != nil {
		return fmt.Errorf("cannot record that dead holder %s was reaped: %v", e.Describe(), err)
	}
	unix.Close(fd)
	return nil
}

// Unreaped rescans the directory and returns the dead holders handed to
// this grant that are still dead and unreaped; the others (removed, or
// marked reaped by an entitled writer: a root reaper, meanwhile) are
// dropped from the grant.
func (g *grant) Unreaped() ([]Ticket, error) {
	snap, err := g.q.scan()
	if err != nil {
		return nil, err
	}
	still := map[uint64]entry{}
	for _, e := range snap.deadWhileHeld(g.q, g.e.Seq) {
		still[e.Seq] = e
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []Ticket
	kept := g.dead[:0]
	for _, e := range g.dead {
		if s, ok := still[e.Seq]; ok && s.dev == e.dev && s.ino == e.ino {
			kept = append(kept, e)
			out = append(out, e.Ticket)
		}
	}
	g.dead = kept
	return out, nil
}

// ReapDead hands the caller the holders that died without releasing and
// are not reaped, without taking the token: for `gpu-hold reap` by root
// while a successor that may not end them waits on them, holding the token.
// Its Release does nothing.
func (q *dirQueue) ReapDead() (Grant, error) {
	snap, err := q.scan()
	if err != nil {
		return nil, err
	}
	return &grant{q: q, fd: -1, detached: true, dead: snap.deadOrUnheld(q)}, nil
}

// Release removes our ticket, then unlocks the token (explicitly, before
// the close that wakes the next ticket). It is idempotent.
func (g *grant) Release() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.fd < 0 {
		return nil
	}
	g.yield.end()
	g.q.noteKeeping(&g.e, nil, &g.kept)
	err := g.q.removeIfSame(g.e.name, g.e.dev, g.e.ino)
	g.tok.close()
	unix.Close(g.fd)
	g.fd = -1
	if err != nil {
		return fmt.Errorf("token released, but cannot remove ticket %s/%s: %v; remove it by hand", g.q.path, g.e.name, err)
	}
	return nil
}

// TakeDead takes the token only if it is free (its holder, if any, died):
// for `gpu-hold reap`. It does not wait in the queue; a live holder gives
// ErrNotDead.
func (q *dirQueue) TakeDead(ctx context.Context, me Ticket) (Grant, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	me, err := q.fill(me)
	if err != nil {
		return nil, err
	}
	tok, err := q.openToken()
	if err != nil {
		return nil, err
	}
	got, err := q.tryLock(tok)
	if err == nil && !got && tok.fd >= 0 {
		got, err = q.tryLock(tok) // once more, if the token file was replaced
	}
	if err != nil || !got {
		tok.close()
		if err != nil {
			return nil, err
		}
		return nil, tagged(ErrNotDead, "%s", q.heldBy(tok.dirBusy))
	}
	snap, err := q.scan()
	if err != nil {
		tok.close()
		return nil, err
	}
	if h := snap.holder(q); h != nil {
		// Its holder lives but lost the lock: the token file was replaced.
		tok.close()
		return nil, tagged(ErrNotDead, "%s holds the token of %s, alive (its token file was replaced)", h.Describe(), q.path)
	}
	dead := snap.deadWhileHeld(q, 0)
	q.cleanup(snap)
	// A ticket, granted from birth, so waiters see who holds the token and
	// wake when it is released.
	me.Granted = time.Now()
	e, fd, _, err := q.newTicket(me)
	if err != nil {
		tok.close()
		return nil, err
	}
	return &grant{q: q, e: e, fd: fd, tok: tok, dead: dead}, nil
}

// heldBy says who keeps TakeDead from the token: the holder, or the
// process that holds the token's lock (the directory's, when dirBusy).
func (q *dirQueue) heldBy(dirBusy bool) string {
	s, err := q.scan()
	if err != nil {
		s = nil
	} else if h := s.holder(q); h != nil {
		return fmt.Sprintf("%s holds the token of %s, alive", h.Describe(), q.path)
	}
	want, what := lockToken, "the token of "+q.path
	if dirBusy {
		want, what = lockDir, "the queue directory "+q.path
	}
	if lk := q.lockerOf(want, s); lk != nil {
		return fmt.Sprintf("%s is locked by %s, alive. %s; %s", what, lk.Describe(), lk.Why(), lk.Remedy())
	}
	return fmt.Sprintf("%s is locked by a process with no valid ticket that /proc/locks does not name, alive", what)
}

// cleanup runs under the token: it removes, where this user may, the
// tickets of waiters that died, dead holders' tickets that were reaped,
// markers whose ticket is gone, and files left by a process that died while
// publishing. What it may not remove (another user's) is left, and skipped.
func (q *dirQueue) cleanup(s *snapshot) {
	names := map[string]bool{}
	for _, e := range s.tickets {
		names[e.name] = true
		switch {
		case e.live: // an unprobed ticket counts as live
		case !e.granted():
			if q.removeIfSame(e.name, e.dev, e.ino) == nil {
				names[e.name] = false
			}
		case s.reaped(&e):
			if q.removeIfSame(e.name, e.dev, e.ino) == nil {
				names[e.name] = false
			}
		}
	}
	for seq, ms := range s.markers {
		if names[ticketName(seq)] {
			continue
		}
		var st unix.Stat_t
		if unix.Fstatat(q.fd, ticketName(seq), &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
			continue // a ticket we could not read: keep its markers
		}
		for _, m := range ms {
			q.removeIfSame(m.name, m.dev, m.ino)
		}
	}
	q.removeStaleTemps(s.temps)
	q.removeStaleNotes(s.notes, names)
}

// removeStaleNotes removes, where this user may, the keeping notes whose
// ticket is gone (a holder killed while it kept its token).
func (q *dirQueue) removeStaleNotes(seqs []uint64, tickets map[string]bool) {
	for _, seq := range seqs {
		var st unix.Stat_t
		if tickets[ticketName(seq)] || unix.Fstatat(q.fd, ticketName(seq), &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
			continue
		}
		if unix.Fstatat(q.fd, keepName(seq), &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
			q.removeIfSame(keepName(seq), st.Dev, st.Ino)
		}
	}
}

// staleTemp is how old a file being published must be before cleanup
// looks at it.
const staleTemp = time.Minute

// removeStaleTemps removes the files being published that are older than
// staleTemp and that no process holds locked: their publisher died. A
// younger one is not even opened: its publisher locks it just after making
// it, and the probe's shared lock, taken in that instant, made the
// publisher's lock fail and its enqueue with it.
func (q *dirQueue) removeStaleTemps(names []string) {
	for _, name := range names {
		var st unix.Stat_t
		if unix.Fstatat(q.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || time.Since(time.Unix(st.Mtim.Unix())) <= staleTemp {
			continue
		}
		fd, st, err := q.openRegular(name, unix.O_RDONLY)
		if err != nil {
			continue
		}
		live, _ := lockedByOther(fd)
		unix.Close(fd)
		if !live && time.Since(time.Unix(st.Mtim.Unix())) > staleTemp {
			q.removeIfSame(name, st.Dev, st.Ino)
		}
	}
}
