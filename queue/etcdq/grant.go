// grant.go owns the held token: the watch for its loss (the holder's own
// deadline passing, etcd saying the lease is gone, the ticket's key
// deleted), its fencing number, the dead holders handed to a holder on the
// same host, and Release.
package etcdq

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/queue"
)

// lostReleaseBound bounds the release of a lost token: a reachable etcd
// answers in far less, an unreachable one is not waited for.
const lostReleaseBound = 500 * time.Millisecond

type grant struct {
	q        *Queue
	w        *waiter // nil: a detached grant (ReapDead)
	rev      int64   // the ticket's create revision: the fencing token
	lostc    chan queue.LostInfo
	lostOnce sync.Once
	lost     atomic.Bool
	stop     chan struct{}

	mu       sync.Mutex
	dead     []deadHolder
	released bool
}

// deadHolder is a held key whose ticket is gone: its holder died holding.
type deadHolder struct {
	key    string
	modRev int64
	t      queue.Ticket
}

// newGrant starts watching for the token's loss and takes the dead
// holders from the take's transaction (its last two reads).
func (q *Queue) newGrant(w *waiter, resp *clientv3.TxnResponse) *grant {
	g := &grant{q: q, w: w, rev: w.rev, lostc: make(chan queue.LostInfo, 1), stop: make(chan struct{})}
	go g.watch(resp.Header.Revision)
	n := len(resp.Responses)
	g.dead = q.deadIn(resp.Responses[n-2].GetResponseRange().Kvs, resp.Responses[n-1].GetResponseRange().Kvs, w.rev)
	return g
}

// deadReads are the reads deadIn needs, for a transaction to end with.
// The tickets are read whole: a keys-only read leaves out their lease.
func (q *Queue) deadReads() []clientv3.Op {
	return []clientv3.Op{
		clientv3.OpGet(q.ticketDir(), clientv3.WithPrefix()),
		clientv3.OpGet(q.heldDir(), clientv3.WithPrefix()),
	}
}

func (g *grant) Ticket() queue.Ticket {
	if g.w == nil {
		return queue.Ticket{}
	}
	return g.w.t
}

// Fence is the ticket's create revision: it grows with every grant.
func (g *grant) Fence() int64 { return g.rev }

// Lost is ready (once) when the token is no longer surely ours. It checks
// the deadline itself as well, so a holder thawed after a stop knows at
// once, before any timer of its own has run.
func (g *grant) Lost() <-chan queue.LostInfo {
	if g.w != nil && g.w.s.expired() {
		g.lose("no keep-alive of the lease was acknowledged in time (etcd unreachable, or this process was stopped): the lease may have expired")
	}
	return g.lostc
}

func (g *grant) lose(reason string) {
	g.lostOnce.Do(func() {
		g.lost.Store(true)
		g.lostc <- queue.LostInfo{At: time.Now(), Reason: reason}
	})
}

// watch loses the token when the deadline passes or etcd says the lease
// is gone; watchKey, when the ticket's key is deleted. It never
// re-acquires.
func (g *grant) watch(from int64) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Its own goroutine: opening a watch blocks while etcd is unreachable,
	// and the deadline must not wait for it.
	go g.watchKey(ctx, from)
	s := g.w.s
	for {
		t := time.NewTimer(time.Until(s.Deadline()))
		select {
		case <-g.stop:
			t.Stop()
			return
		case <-t.C:
			if s.expired() {
				g.lose(fmt.Sprintf("no keep-alive of the lease was acknowledged by its deadline (ttl %v less one interval of %v): the lease may have expired", s.ttl, s.interval))
				return
			}
		case <-s.nextAck():
			t.Stop()
		case <-s.gone:
			t.Stop()
			g.lose("etcd says the lease expired")
			return
		}
	}
}

// watchKey loses the token when the ticket's key is deleted or written
// by anyone (the holder writes it last at the take, revision from): a key
// rewritten onto no lease, another lease or a value that is no ticket is
// skipped by the waiters (trust.go), who then go ahead. It watches again
// (from where it last read) after the watch failed.
func (g *grant) watchKey(ctx context.Context, from int64) {
	took := from
	for ctx.Err() == nil {
		for r := range g.q.cli.Watch(ctx, g.w.key, clientv3.WithRev(from+1)) {
			if r.Err() != nil {
				break
			}
			for _, ev := range r.Events {
				if ev.Type == mvccpb.DELETE {
					g.lose("the ticket's key was deleted from etcd")
				} else {
					g.lose(fmt.Sprintf("the ticket's key was overwritten in etcd by another client (now on lease %x): the other tickets no longer see this hold's", ev.Kv.Lease))
				}
				return
			}
		}
		if ctx.Err() != nil {
			return
		}
		at, gone := g.keyGone(ctx, took)
		if gone {
			g.lose("the ticket's key is gone from etcd, or was overwritten by another client")
			return
		}
		if at > 0 {
			from = at
		}
	}
}

// keyGone reads the ticket's key again after its watch failed (compacted,
// say): gone when it no longer is our ticket as the take wrote it (at
// revision took); at is the revision read at (0: etcd did not answer, the
// deadline still guards).
func (g *grant) keyGone(ctx context.Context, took int64) (at int64, gone bool) {
	ctx, cancel := context.WithTimeout(ctx, g.w.s.interval)
	defer cancel()
	resp, err := g.q.cli.Get(ctx, g.w.key)
	if err != nil {
		time.Sleep(retryAfterFailure)
		return 0, false
	}
	if len(resp.Kvs) == 0 {
		return resp.Header.Revision, true
	}
	kv := resp.Kvs[0]
	return resp.Header.Revision, kv.CreateRevision != g.rev || kv.ModRevision != took || clientv3.LeaseID(kv.Lease) != g.w.s.id
}

// deadHolders lists the held keys whose ticket is gone (read in one
// transaction, so a holder granted meanwhile is not taken for dead). A
// holder on another host is that host's to reap: it is said, not handed
// on. One on this host that still runs lost its lease and ends its own
// payload: it is not handed on either.
func (q *Queue) deadHolders(ctx context.Context, mine int64) ([]deadHolder, error) {
	resp, err := q.cli.Txn(ctx).Then(q.deadReads()...).Commit()
	if err != nil {
		return nil, err
	}
	return q.deadIn(resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs, mine), nil
}

// deadIn is deadHolders from its two reads: the tickets and the held keys.
// A ticket keeps its holder alive only while it is on its own lease
// (trust.go): one rewritten onto no lease outlives its holder.
func (q *Queue) deadIn(tickets, held []*mvccpb.KeyValue, mine int64) []deadHolder {
	live := map[int64]bool{}
	for _, kv := range tickets {
		if q.notLive(kv) == "" {
			live[kv.CreateRevision] = true
		}
	}
	var out []deadHolder
	for _, kv := range held {
		rev, err := strconv.ParseInt(strings.TrimPrefix(string(kv.Key), q.heldDir()), 10, 64)
		if err != nil || rev == mine || live[rev] {
			continue
		}
		t, ok := q.decode(kv.Value, rev)
		if !ok {
			continue
		}
		d := deadHolder{key: string(kv.Key), modRev: kv.ModRevision, t: t}
		switch {
		case t.Host != q.cfg.Host:
			q.warn(fmt.Sprintf("holder %s on host %s died holding the %s token: its host is responsible for ending its lineage (its next hold there does, or run gpu-hold reap there)", t.Describe(), t.Host, q.resource))
		case proc.Alive(t.Holder):
			q.warn(fmt.Sprintf("holder %s lost its lease but still runs on this host: it ends its own payload (lease-lost)", t.Describe()))
		default:
			out = append(out, d)
		}
	}
	return out
}

func (g *grant) Dead() []queue.Ticket {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]queue.Ticket, len(g.dead))
	for i, d := range g.dead {
		out[i] = d.t
	}
	return out
}

// Reaped removes dead's held key (if it is still the one handed over).
func (g *grant) Reaped(dead queue.Ticket) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, d := range g.dead {
		if d.t.Seq != dead.Seq {
			continue
		}
		ctx, cancel := g.q.ctx(nil)
		defer cancel()
		_, err := g.q.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(d.key), "=", d.modRev)).Then(clientv3.OpDelete(d.key)).Commit()
		if err != nil {
			return fmt.Errorf("cannot remove dead holder %s's key %s from etcd: %v", d.t.Describe(), d.key, err)
		}
		g.dead = append(g.dead[:i], g.dead[i+1:]...)
		return nil
	}
	return fmt.Errorf("ticket %d is not a dead holder handed to this grant", dead.Seq)
}

// Unreaped drops the dead holders whose held key is gone (reaped by
// someone else) and returns the rest.
func (g *grant) Unreaped() ([]queue.Ticket, error) {
	ctx, cancel := g.q.ctx(nil)
	defer cancel()
	resp, err := g.q.cli.Get(ctx, g.q.heldDir(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %v", g.q, err)
	}
	still := map[string]int64{}
	for _, kv := range resp.Kvs {
		still[string(kv.Key)] = kv.ModRevision
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	kept := g.dead[:0]
	var out []queue.Ticket
	for _, d := range g.dead {
		if still[d.key] == d.modRev {
			kept = append(kept, d)
			out = append(out, d.t)
		}
	}
	g.dead = kept
	return out, nil
}

// Release removes the ticket and its held key in one transaction, then
// revokes the lease. It is idempotent; a detached grant has nothing to
// release. After a loss it tries briefly (lostReleaseBound): the hold must
// exit within the TTL, and the lease frees the token anyway.
func (g *grant) Release() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.released || g.w == nil {
		return nil
	}
	g.released = true
	close(g.stop)
	bound := g.q.cfg.ConnectTimeout
	if g.lost.Load() {
		bound = min(g.w.s.interval, lostReleaseBound)
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	_, err := g.q.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(g.w.key), "=", g.rev)).
		Then(clientv3.OpDelete(g.w.key), clientv3.OpDelete(g.q.heldKey(g.rev))).
		Else(clientv3.OpDelete(g.q.heldKey(g.rev))).Commit()
	if err != nil {
		g.w.s.stopKeeping()
		return fmt.Errorf("cannot release the token in %s (%v): the lease expires within %v and frees it; its held key stays, so the next hold on this host checks that nothing of this one is left", g.q, err, g.w.s.ttl)
	}
	if rerr := g.w.s.close(bound); rerr != nil {
		g.q.warn(fmt.Sprintf("token released, but revoking the lease failed (%v): it expires by itself", rerr))
	}
	return nil
}
