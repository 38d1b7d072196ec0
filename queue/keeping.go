// keeping.go owns the note a holder publishes while it keeps its token
// after its payload ended, because a process outside its lineage holds
// the device (--device-holders=wait|fail): k.<seq> beside its ticket,
// which gpu-hold queue and the waiters show. It is a file of its own, not
// a field of the ticket: a republished ticket's ctime is the kernel's
// account of its grant (Ticket.Published), which must not move. A reader
// believes a note only from the ticket's owner, naming the ticket's seq
// and holder; its text is that user's, shown with control characters
// escaped.
package queue

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/termsafe"
)

const keepPrefix = "k."

func keepName(seq uint64) string { return fmt.Sprintf("%s%0*d", keepPrefix, seqDigits, seq) }

// Keeping is what a holder keeps its token for after its payload ended:
// the processes outside its lineage that hold the device.
type Keeping struct {
	Since   time.Time  `json:"since"`
	Holders []KeptNode `json:"holders"`
}

// KeptNode is one process holding one device node while the token is kept.
type KeptNode struct {
	Node    string `json:"node"`
	PID     int    `json:"pid"`
	UID     int    `json:"uid"`
	User    string `json:"user,omitempty"`
	Command string `json:"command,omitempty"`
}

// KeepingNoter is the optional interface of a Grant whose holder can tell
// the queue why it keeps the token after its payload ended.
type KeepingNoter interface {
	// NoteKeeping publishes k (nil: it no longer keeps the token).
	NoteKeeping(k *Keeping) error
}

// keepNote is a note's file: the ticket it is about, and the keeping.
type keepNote struct {
	Seq     uint64     `json:"seq"`
	Holder  proc.Ident `json:"holder"`
	Keeping Keeping    `json:"keeping"`
}

// Bounds on what a note holds and what a reader shows of it.
const (
	maxKeptNodes = 8
	maxKeptText  = 256
)

// Line says what the token is kept for, for a status line or a message:
// "the holder keeps the token while /dev/x is held by pid N (user: cmd)".
func (k *Keeping) Line() string {
	parts := make([]string, 0, len(k.Holders))
	for _, h := range k.Holders {
		who := h.User
		if who == "" {
			who = UserName(h.UID)
		}
		parts = append(parts, fmt.Sprintf("%s is held by pid %d (%s: %s)", termsafe.Text(short(h.Node, 64)), h.PID, termsafe.Text(short(who, 32)), termsafe.Text(short(h.Command, 80))))
	}
	return "the holder keeps the token while " + strings.Join(parts, ", ")
}

func short(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// bounded is k cut to what a note holds.
func (k Keeping) bounded() Keeping {
	k.Holders = append([]KeptNode(nil), k.Holders[:min(len(k.Holders), maxKeptNodes)]...)
	for i := range k.Holders {
		h := &k.Holders[i]
		h.Node, h.User, h.Command = clip(h.Node, maxKeptText), clip(h.User, maxKeptText), clip(h.Command, maxKeptText)
	}
	return k
}

// noteKeeping publishes or removes the note of the granted ticket e,
// remembering the file it wrote in *at (removed only while it is that).
func (q *dirQueue) noteKeeping(e *entry, k *Keeping, at *[2]uint64) error {
	name := keepName(e.Seq)
	if k == nil {
		if at[1] == 0 {
			return nil
		}
		err := q.removeIfSame(name, at[0], at[1])
		*at = [2]uint64{}
		return err
	}
	b, _ := json.Marshal(keepNote{Seq: e.Seq, Holder: e.Holder, Keeping: k.bounded()})
	fd, st, err := q.publish(name, append(b, '\n'), false)
	if err != nil {
		return fmt.Errorf("cannot tell the queue why the token is kept: %v", err)
	}
	unix.Close(fd)
	*at = [2]uint64{st.Dev, st.Ino}
	return nil
}

// keepingOf reads the note of the granted ticket e: nil when there is
// none, or none its owner wrote about it (reported once).
func (q *dirQueue) keepingOf(e *entry) *Keeping {
	name := keepName(e.Seq)
	fd, st, err := q.openRegular(name, unix.O_RDONLY)
	if err != nil {
		var nr *notRegular
		if errors.As(err, &nr) {
			q.warnf(fmt.Sprintf("%s@%d", name, st.Ino), "ignoring %s/%s: %v", q.path, name, err)
		}
		return nil
	}
	defer unix.Close(fd)
	bad := func(why string) *Keeping {
		q.warnf(fmt.Sprintf("%s@%d", name, st.Ino), "ignoring %s/%s (uid %d): %s", q.path, name, st.Uid, why)
		return nil
	}
	if int(st.Uid) != e.UID {
		return bad(fmt.Sprintf("the ticket it is about belongs to uid %d; only its owner says why it keeps the token", e.UID))
	}
	b, err := readAll(fd)
	if err != nil {
		return bad(err.Error())
	}
	var n keepNote
	if err := json.Unmarshal(b, &n); err != nil {
		return bad("not a note of gpu-hold's (" + err.Error() + ")")
	}
	if n.Seq != e.Seq || n.Holder != e.Holder {
		return nil // a note left by an earlier holder of the same number
	}
	k := n.Keeping.bounded()
	return &k
}

// NoteKeeping publishes why the holder keeps the token (k), or removes
// the note (nil).
func (g *grant) NoteKeeping(k *Keeping) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.fd < 0 {
		return nil // released: nothing is kept
	}
	return g.q.noteKeeping(&g.e, k, &g.kept)
}

// NoteKeeping publishes k on every device the pool hold holds.
func (g *PoolGrant) NoteKeeping(k *Keeping) error {
	g.mu.Lock()
	gs := append([]*grant(nil), g.gs...)
	g.mu.Unlock()
	var errs []error
	for _, dg := range gs {
		errs = append(errs, dg.NoteKeeping(k))
	}
	return errors.Join(errs...)
}
