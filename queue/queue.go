// Package queue owns waiting and the exclusive token of a resource: FIFO
// tickets, the holder's identity, and what is handed to the next ticket when
// a holder died without releasing. It knows nothing of a holder's lineage.
// queue.go owns the Queue interface and the records it exchanges.
package queue

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/termsafe"
)

// Ticket is a place in a resource's queue. Seq is assigned by the queue,
// atomically, and orders the queue.
type Ticket struct {
	Seq      uint64     `json:"seq"`
	Resource string     `json:"resource"`
	Label    string     `json:"label,omitempty"`
	Holder   proc.Ident `json:"holder"` // the gpu-hold process that owns the ticket
	UID      int        `json:"uid"`
	Host     string     `json:"host"`
	Cmd      []string   `json:"cmd,omitempty"`
	Created  time.Time  `json:"created"`
	// HoldID names the hold; Record is the path of its streamed lineage
	// record, through which a successor can end a dead holder's lineage.
	HoldID string `json:"hold_id,omitempty"`
	Record string `json:"record,omitempty"`
	// MaxHold is the hold's --max-hold (0: none), for the time left that
	// gpu-hold queue shows; nothing acts on it.
	MaxHold time.Duration `json:"max_hold_ns,omitempty"`
	// Granted is set on the holder's entry once it took the token.
	Granted time.Time `json:"granted,omitzero"` // omitzero: a waiter has none
	// Pool holds (pool.go): Count devices asked; Bound, the hold's tenure
	// bound once granted (0: none); Devices, the pool indices a running
	// pool ticket holds (shown, never believed); PoolSeq, on a device's
	// ticket, the pool ticket it was taken for.
	Count   int           `json:"count,omitempty"`
	Bound   time.Duration `json:"bound_ns,omitempty"`
	Devices []int         `json:"devices,omitempty"`
	PoolSeq uint64        `json:"pool_seq,omitempty"`
	// Yield: the ticket gives way to every other ticket (yield.go). It
	// changes only this ticket's own treatment.
	Yield bool `json:"yield,omitempty"`
	// PidNS is the pid namespace (its inode) the Holder's pid means
	// something in: a queue directory may be shared with containers, and
	// a holder of another namespace can only be told alive by its lock.
	// 0: the reader's (tickets of earlier versions).
	PidNS uint64 `json:"pid_ns,omitempty"`
	// Keeping is why a holder keeps the token after its payload ended,
	// from the note its owner publishes (keeping.go); nil: none, or not
	// read. It is never part of the ticket's file.
	Keeping *Keeping `json:"-"`
	// Unheld marks a dead holder handed on though the process its ticket
	// names is alive: a granted ticket, kept locked, whose holder holds no
	// lock of the queue (the token's, the directory's). A payload can make
	// one of its own ticket (its user's file): a reap must end its lineage
	// all the same, not take it for a forgery to leave alone.
	Unheld bool `json:"-"`
	// Published is when the directory queue's file was last published, as
	// the kernel keeps it (its ctime, which no user can set back): a
	// granted ticket's is its grant, before its payload started. Zero
	// where unknown (etcd).
	Published time.Time `json:"-"`
}

// Queue is one resource's queue. The directory backend is the first; a
// distributed one can be added behind the same interface.
type Queue interface {
	// Enqueue takes a ticket for t (its Seq is assigned) and returns it.
	Enqueue(t Ticket) (Waiter, error)
	// Status lists the holder (if any) and the waiters in order.
	Status() (Status, error)
	// Cancel removes waiting ticket seq. Only its owner (uid) or root may.
	Cancel(seq uint64, uid int) error
	// TakeDead takes the token when its holder is dead, for `gpu-hold reap`:
	// it returns ErrNotDead when the token is held by a live holder, and a
	// Grant with no Dead entries when the token was free.
	TakeDead(ctx context.Context, me Ticket) (Grant, error)
	// ReapDead hands over the unreaped dead holders without the token (a
	// live successor may hold it while it waits for them to be ended).
	ReapDead() (Grant, error)
}

// Waiter is a ticket waiting for the token.
type Waiter interface {
	Ticket() Ticket
	// Wait blocks until this ticket is first and the token is free, then
	// takes the token. It is event-driven (no poll quantum). It returns:
	//   ErrRemoved  when the ticket was removed by someone else;
	//   ctx.Err()   when ctx ends (the -w allowance, or a signal), after
	//               removing the ticket; the error is a *WaitTimeout when
	//               the allowance ran out, naming the current holder.
	// progress (may be nil) is called when the position or holder changes.
	Wait(ctx context.Context, progress func(Position)) (Grant, error)
	// Cancel removes the ticket (idempotent).
	Cancel() error
}

// Grant is the token, held. Dead lists previous holders that died without
// releasing: the caller must end their lineage, then call Reaped for each,
// before starting its payload. Until Reaped is called the dead holder stays
// on record, so a successor that dies while reaping hands it on again.
type Grant interface {
	Ticket() Ticket
	Dead() []Ticket
	Reaped(dead Ticket) error
	// Unreaped rescans and returns the dead holders not yet reaped by
	// anyone entitled to (the others are dropped from the grant).
	Unreaped() ([]Ticket, error)
	// Release gives the token to the next ticket and removes ours.
	Release() error
}

// Contender is the optional interface of a Grant of a yielding ticket:
// Contended is closed once a ticket that does not yield waits for the
// token (nil for a ticket that does not yield: it never fires).
type Contender interface {
	Contended() <-chan struct{}
}

// Fenced is a Grant whose token can be lost while held (the etcd backend's
// lease): Lost is closed-and-ready once the token is no longer ours, and
// Fence is the token's fencing number (it grows with every grant). The
// directory backend's token cannot be lost and does not implement it.
type Fenced interface {
	Lost() <-chan LostInfo
	Fence() int64
}

// CtxEnqueuer is a Queue whose Enqueue waits on a server: EnqueueCtx is
// Enqueue bounded by ctx as well (the -w allowance).
type CtxEnqueuer interface {
	EnqueueCtx(ctx context.Context, t Ticket) (Waiter, error)
}

// LostInfo says when the holder knew the token was lost, and why.
type LostInfo struct {
	At     time.Time
	Reason string
}

// Position is what a waiter knows about its place.
type Position struct {
	Ahead  int     // tickets ahead of ours, excluding the holder
	Holder *Ticket // current holder, if any
	// Waiting says what a pool ticket waits for (empty for a token).
	Waiting string
	// Locker is what holds the token up where no gpu-hold holder
	// explains it: a process holding the queue's own locks with no
	// ticket, or on a granted ticket while it is not a gpu-hold.
	Locker *Locker
}

// Status is a snapshot of a queue.
type Status struct {
	Resource string   `json:"resource"`
	Holder   *Ticket  `json:"holder,omitempty"`
	Holders  []Ticket `json:"holders,omitempty"` // further holders, where a budget allows more than one
	Waiters  []Ticket `json:"waiters"`
	Dead     []Ticket `json:"dead,omitempty"`    // holders that died and are not yet reaped
	Skipped  []string `json:"skipped,omitempty"` // files in the directory that are not ours (reported, ignored)
	// Lockers hold the queue's own locks (the token's, the directory's)
	// where no gpu-hold holder explains it; every hold waits for them.
	Lockers []Locker `json:"lockers,omitempty"`
}

var (
	// ErrRemoved: the ticket was removed by someone else while waiting.
	ErrRemoved = errors.New("ticket was removed while waiting")
	// ErrNotDead: the token's holder is alive.
	ErrNotDead = errors.New("token holder is alive")
	// ErrNotOwner: a cancel by someone who neither owns the ticket nor is root.
	ErrNotOwner = errors.New("ticket belongs to another user")
	// ErrNoTicket: no such ticket.
	ErrNoTicket = errors.New("no such ticket")
	// ErrUnreachable: a queue on a server (etcd) did not answer within its
	// connect bound; nothing was queued.
	ErrUnreachable = errors.New("etcd is unreachable")
)

// WaitTimeout is returned when the -w allowance ran out.
type WaitTimeout struct {
	Waited time.Duration
	Holder *Ticket
	Locker *Locker // what held the token up where no gpu-hold holder explains it
}

func (e *WaitTimeout) Error() string {
	s := "the wait allowance of " + Round(e.Waited).String() + " ran out"
	if e.Holder != nil {
		s += "; the token is held by " + e.Holder.Describe() + " for " + time.Since(e.Holder.Granted).Round(time.Second).String()
		if k := e.Holder.Keeping; k != nil {
			s += "; " + k.Line()
		}
	}
	if e.Locker != nil {
		s += "; " + e.Locker.Summary()
	}
	return s
}

// Round shortens a measured duration for a message: -w 1s ran out after
// 1.000926287s, which a person reads as 1s.
func Round(d time.Duration) time.Duration {
	switch {
	case d >= time.Minute:
		return d.Round(time.Second)
	case d >= time.Second:
		return d.Round(100 * time.Millisecond)
	case d >= 100*time.Millisecond:
		return d.Round(10 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}

// Describe names a ticket for messages: label, pid, uid and seq.
func (t Ticket) Describe() string {
	label := termsafe.Text(t.Label) // anyone's text, shown to root too
	if label == "" {
		label = "(no label)"
	}
	return label + " (ticket " + strconv.FormatUint(t.Seq, 10) + ", pid " + strconv.Itoa(t.Holder.PID) + ", uid " + strconv.Itoa(t.UID) + ")"
}
