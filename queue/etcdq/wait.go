// wait.go owns a waiting ticket: Enqueue (a lease, then a key on it), the
// wait (a ticket is granted while fewer than the budget are ahead of it),
// what it watches meanwhile, and the take that turns the ticket into a
// holder. With a budget of 1 a waiter watches only the ticket before it;
// with a budget of K it counts the deletions ahead of it (watching the K-th
// before it alone would miss a wake when tickets between go first).
package etcdq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/gpu-hold/gpu-hold/queue"
)

type waiter struct {
	q    *Queue
	s    *session
	key  string
	rev  int64
	t    queue.Ticket
	mu   sync.Mutex
	done bool // granted or cancelled
}

// Enqueue takes a lease and puts the ticket on it. etcd not answering
// within the connect timeout is ErrUnreachable, and nothing is left.
func (q *Queue) Enqueue(t queue.Ticket) (queue.Waiter, error) {
	ctx, cancel := q.ctx(nil)
	defer cancel()
	return q.enqueue(ctx, t)
}

// EnqueueCtx is Enqueue bounded by ctx as well (the -w allowance).
func (q *Queue) EnqueueCtx(ctx context.Context, t queue.Ticket) (queue.Waiter, error) {
	ctx, cancel := q.ctx(ctx)
	defer cancel()
	return q.enqueue(ctx, t)
}

func (q *Queue) enqueue(ctx context.Context, t queue.Ticket) (*waiter, error) {
	t.Resource = q.resource
	if t.Host == "" {
		t.Host = q.cfg.Host
	}
	if err := q.agreeBudget(ctx, true); err != nil {
		return nil, err
	}
	s, err := newSession(ctx, q.cli, q.cfg.TTL)
	if err != nil {
		return nil, unreachable(&q.cfg, err)
	}
	key := q.ticketKey(s.id)
	resp, err := q.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, encode(t), clientv3.WithLease(s.id))).Commit()
	if err != nil || !resp.Succeeded {
		s.close(time.Second)
		if err == nil {
			err = errors.New("a key of the same lease exists")
		}
		return nil, fmt.Errorf("cannot put a ticket in %s: %v", q, err)
	}
	t.Seq = uint64(resp.Header.Revision)
	return &waiter{q: q, s: s, key: key, rev: resp.Header.Revision, t: t}, nil
}

func (w *waiter) Ticket() queue.Ticket { return w.t }

// Cancel removes the ticket by revoking its lease (idempotent), trying
// for one keep-alive interval: an unreachable etcd lets the lease expire.
func (w *waiter) Cancel() error {
	w.mu.Lock()
	if w.done {
		w.mu.Unlock()
		return nil
	}
	w.done = true
	w.mu.Unlock()
	return w.s.close(w.s.interval)
}

// Wait blocks until fewer than the budget are ahead of the ticket, then
// takes the token. etcd unreachable meanwhile is waited through while the
// lease lives; its loss is ErrRemoved.
func (w *waiter) Wait(ctx context.Context, progress func(queue.Position)) (queue.Grant, error) {
	start := time.Now()
	var last *queue.Position
	for {
		l, err := w.q.readLine(ctx)
		if err != nil {
			if werr := w.outage(ctx, start, nil); werr != nil {
				return nil, werr
			}
			continue
		}
		i := l.index(w.rev)
		if i < 0 {
			w.Cancel()
			return nil, w.removed()
		}
		if pos := position(l, i, w.q.cfg.Budget); progress != nil && (last == nil || *last != pos) {
			progress(pos)
			last = &pos
		}
		if i < w.q.cfg.Budget {
			g, err := w.take(ctx)
			if err == errRetry {
				continue
			}
			return g, err
		}
		if err := w.sleep(ctx, l, i, start); err != nil {
			return nil, err
		}
	}
}

// position is the ticket's place: the tickets ahead beyond the holders,
// and the first holder.
func position(l *line, i, budget int) queue.Position {
	p := queue.Position{Ahead: max(0, i-budget)}
	if i > 0 {
		h := l.tickets[0].t
		p.Holder = &h
	}
	return p
}

// removed says why the ticket is gone: its lease expired, or someone
// deleted it.
func (w *waiter) removed() error {
	select {
	case <-w.s.gone:
	default:
		if !w.s.expired() {
			return queue.ErrRemoved
		}
	}
	return fmt.Errorf("%w: its etcd lease expired (etcd was unreachable, or this process stopped, for longer than its ttl of %v)", queue.ErrRemoved, w.s.ttl)
}

// outage waits a moment when etcd did not answer: the ticket keeps its
// place while its lease lives. ctx's end is the wait's end.
func (w *waiter) outage(ctx context.Context, start time.Time, holder *queue.Ticket) error {
	select {
	case <-ctx.Done():
		return w.ended(ctx, start, holder)
	case <-w.s.gone:
		w.Cancel()
		return w.removed()
	case <-time.After(retryAfterFailure):
		return nil
	}
}

// ended removes the ticket and returns the error of a wait whose ctx ended.
func (w *waiter) ended(ctx context.Context, start time.Time, holder *queue.Ticket) error {
	w.Cancel()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &queue.WaitTimeout{Waited: time.Since(start).Round(time.Millisecond), Holder: holder}
	}
	return ctx.Err()
}

// sleep watches what can move the ticket (its own key, and the ticket
// before it, or, with a budget over 1, every ticket ahead) from the
// revision l was read at, and returns when one moved: deleted, or
// rewritten into a key that is no live ticket (trust.go), which the next
// read skips.
func (w *waiter) sleep(ctx context.Context, l *line, i int, start time.Time) error {
	// No WithRequireLeader: the watch rides out etcd's restarts, resuming
	// from the last revision it saw. Opening it blocks while etcd is
	// unreachable: a lease known gone ends that too.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-w.s.gone:
			cancel()
		case <-wctx.Done():
		}
	}()
	from := clientv3.WithRev(l.rev + 1)
	own := w.q.cli.Watch(wctx, w.key, from)
	var ahead clientv3.WatchChan
	need := 1
	if w.q.cfg.Budget == 1 {
		ahead = w.q.cli.Watch(wctx, l.tickets[i-1].key, from)
	} else {
		ahead = w.q.cli.Watch(wctx, w.q.ticketDir(), from, clientv3.WithPrefix(), clientv3.WithPrevKV())
		need = i - w.q.cfg.Budget + 1
	}
	holder := &l.tickets[0].t
	for {
		select {
		case <-ctx.Done():
			return w.ended(ctx, start, holder)
		case <-w.s.gone:
			w.Cancel()
			return w.removed()
		case r, ok := <-own:
			if !ok || r.Err() != nil || len(r.Events) > 0 {
				return nil // look again
			}
		case r, ok := <-ahead:
			if !ok || r.Err() != nil {
				return nil
			}
			for _, ev := range r.Events {
				if w.gone(ev) {
					need--
				}
			}
			if need <= 0 {
				return nil
			}
		}
	}
}

// gone reports whether ev takes a ticket ahead of w out of the line: its
// deletion, or a write that leaves a key that is no live ticket. A put
// that leaves a live ticket (a take) moves nothing, nor does anything
// behind w.
func (w *waiter) gone(ev *clientv3.Event) bool {
	if ev.Type == clientv3.EventTypeDelete {
		return ev.PrevKv == nil || ev.PrevKv.CreateRevision < w.rev
	}
	if ev.Kv.CreateRevision >= w.rev {
		return false
	}
	_, why := w.q.ticketOf(ev.Kv)
	return why != ""
}

// errRetry: the take lost a race with the lease's renewal; look again.
var errRetry = errors.New("retry")

// take makes the ticket a holder: the ticket (still ours, same create
// revision) gets its granted time, and a leaseless held key names it, in
// one transaction. The lease must be known alive first.
func (w *waiter) take(ctx context.Context) (queue.Grant, error) {
	if w.s.expired() {
		// Granted on a lease that may be gone: renew first.
		select {
		case <-w.s.nextAck():
			return nil, errRetry
		case <-w.s.gone:
			w.Cancel()
			return nil, w.removed()
		case <-ctx.Done():
			return nil, w.ended(ctx, time.Now(), nil)
		}
	}
	t := w.t
	t.Granted = time.Now()
	val := encode(t)
	resp, err := w.q.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(w.key), "=", w.rev)).
		Then(append([]clientv3.Op{clientv3.OpPut(w.key, val, clientv3.WithLease(w.s.id)), clientv3.OpPut(w.q.heldKey(w.rev), val)}, w.q.deadReads()...)...).Commit()
	if err != nil {
		if ctx.Err() != nil {
			return nil, w.ended(ctx, time.Now(), nil)
		}
		return nil, errRetry
	}
	if !resp.Succeeded {
		w.Cancel()
		return nil, w.removed()
	}
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
	w.t = t
	return w.q.newGrant(w, resp), nil
}
