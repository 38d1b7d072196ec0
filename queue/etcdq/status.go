// status.go owns what `gpu-hold queue`, `cancel` and `reap` ask of the
// etcd backend: the snapshot (holders, waiters, dead holders, garbage),
// cancelling a waiting ticket, and the token taken for a reap.
package etcdq

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/gpu-hold/gpu-hold/queue"
)

// Status lists the holders (the first budget tickets), the waiters in
// order, and the holders that died holding (any host).
func (q *Queue) Status() (queue.Status, error) {
	ctx, cancel := q.ctx(nil)
	defer cancel()
	st := queue.Status{Resource: q.resource, Waiters: []queue.Ticket{}}
	if err := q.agreeBudget(ctx, false); err != nil {
		return st, err
	}
	l, err := q.readLine(ctx)
	if err != nil {
		return st, unreachable(&q.cfg, err)
	}
	for i, e := range l.tickets {
		switch {
		case i == 0 && q.cfg.Budget > 0:
			t := e.t
			st.Holder = &t
		case i < q.cfg.Budget:
			st.Holders = append(st.Holders, e.t)
		default:
			st.Waiters = append(st.Waiters, e.t)
		}
	}
	st.Skipped = l.skipped
	dead, err := q.allDead(ctx, l)
	if err != nil {
		return st, unreachable(&q.cfg, err)
	}
	st.Dead = dead
	return st, nil
}

// allDead is every held key whose ticket is not in l.
func (q *Queue) allDead(ctx context.Context, l *line) ([]queue.Ticket, error) {
	resp, err := q.cli.Get(ctx, q.heldDir(), clientv3.WithPrefix(), clientv3.WithRev(l.rev))
	if err != nil {
		return nil, err
	}
	var out []queue.Ticket
	for _, kv := range resp.Kvs {
		var rev int64
		if _, err := fmt.Sscanf(string(kv.Key[len(q.heldDir()):]), "%d", &rev); err != nil || l.index(rev) >= 0 {
			continue
		}
		if t, ok := q.decode(kv.Value, rev); ok {
			out = append(out, t)
		}
	}
	return out, nil
}

// Cancel removes waiting ticket seq for uid. The uid in a ticket is its
// writer's claim: what really decides who may delete keys is etcd's auth
// (give each user a role that may write only its own keys, or trust the
// fleet's users alike).
func (q *Queue) Cancel(seq uint64, uid int) error {
	ctx, cancel := q.ctx(nil)
	defer cancel()
	if err := q.agreeBudget(ctx, false); err != nil {
		return err
	}
	l, err := q.readLine(ctx)
	if err != nil {
		return unreachable(&q.cfg, err)
	}
	i := l.index(int64(seq))
	if i < 0 {
		return fmt.Errorf("%w: ticket %d is not in the queue of %s: see `gpu-hold queue -r %s`", queue.ErrNoTicket, seq, q, q.resource)
	}
	e := l.tickets[i]
	if uid != 0 && uid != e.t.UID {
		return fmt.Errorf("%w: ticket %d (%s) belongs to uid %d; only its owner or root may cancel it", queue.ErrNotOwner, seq, e.t.Describe(), e.t.UID)
	}
	if i < q.cfg.Budget {
		return fmt.Errorf("%w: ticket %d (%s, host %s) holds the token; cancel removes waiting tickets only: to end the hold, send its gpu-hold (pid %d on %s) SIGTERM", queue.ErrHolding, seq, e.t.Describe(), e.t.Host, e.t.Holder.PID, e.t.Host)
	}
	resp, err := q.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(e.key), "=", e.rev)).Then(clientv3.OpDelete(e.key)).Commit()
	if err != nil {
		return fmt.Errorf("cannot delete ticket %d from %s: %v (etcd's auth may refuse it: only its owner's etcd user or an admin may)", seq, q, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w: ticket %d left the queue of %s meanwhile", queue.ErrNoTicket, seq, q)
	}
	return nil
}

// TakeDead takes the token for `gpu-hold reap` only when it is free now
// (fewer than the budget hold it); otherwise ErrNotDead: a dead holder's
// ticket goes with its lease, within the ttl.
func (q *Queue) TakeDead(ctx context.Context, me queue.Ticket) (queue.Grant, error) {
	cctx, cancel := q.ctx(ctx)
	defer cancel()
	w, err := q.enqueue(cctx, me)
	if err != nil {
		return nil, err
	}
	l, err := q.readLine(cctx)
	if err != nil {
		w.Cancel()
		return nil, unreachable(&q.cfg, err)
	}
	if err := l.takeDeadRefusal(w.rev, q); err != nil {
		w.Cancel()
		return nil, err
	}
	return w.take(cctx)
}

// takeDeadRefusal says why the ticket of revision rev may not take the
// token now (nil: it may): it is not within the budget, or it is gone
// (deleted between its put and this read, by anyone who can write the
// prefix), in which case no ticket may be the one that holds.
func (l *line) takeDeadRefusal(rev int64, q *Queue) error {
	i := l.index(rev)
	switch {
	case i < 0:
		return fmt.Errorf("%w: this reap's own ticket in %s was deleted as soon as it was put: check who else writes the prefix, and run the reap again", queue.ErrNotDead, q)
	case i >= q.cfg.Budget:
		return fmt.Errorf("%w: %s holds the token of %s (a dead holder's ticket goes when its lease expires, within %v)", queue.ErrNotDead, l.tickets[0].t.Describe(), q, q.cfg.TTL)
	}
	return nil
}

// ReapDead hands over the dead holders of this host without the token.
func (q *Queue) ReapDead() (queue.Grant, error) {
	ctx, cancel := q.ctx(nil)
	defer cancel()
	dead, err := q.deadHolders(ctx, 0)
	if err != nil {
		return nil, unreachable(&q.cfg, err)
	}
	return &grant{q: q, dead: dead, lostc: make(chan queue.LostInfo, 1), stop: make(chan struct{})}, nil
}

var _ queue.Queue = (*Queue)(nil)
