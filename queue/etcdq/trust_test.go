// trust_test.go tests the keys that anyone who may write the prefix can put
// under q/ (trust.go): a key on no lease, one on a lease its name does not
// claim, garbage names, names outside the layout, and a holder's ticket
// rewritten onto no lease. None may wedge the queue; each is reported once.
package etcdq

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/gpu-hold/gpu-hold/internal/etcdtest"
	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/queue"
)

// warnings collects a queue's warnings.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) add(m string) { w.mu.Lock(); w.msgs = append(w.msgs, m); w.mu.Unlock() }

// count is how many warnings name key.
func (w *warnings) count(key string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, m := range w.msgs {
		if strings.Contains(m, strconv.Quote(key)) {
			n++
		}
	}
	return n
}

func openWarned(t *testing.T, s *etcdtest.Server, prefix string, budget int) (*Queue, *warnings) {
	t.Helper()
	var c Config
	if err := c.ParseURL(s.URL(prefix)); err != nil {
		t.Fatal(err)
	}
	c.Budget, c.TTLSec, c.Host = budget, 4, "h1"
	w := &warnings{}
	q, err := Open(c, "gpu", func(m string) { t.Log("warn: " + m); w.add(m) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return q, w
}

// plant puts keys under q/ as a hostile client would, each a well-formed
// ticket that claims to hold, before any hold queues (so they come first
// by create revision), and returns them.
func plant(t *testing.T, q *Queue) []string {
	t.Helper()
	ctx, cancel := q.ctx(nil)
	defer cancel()
	// A live lease of another session (its own key outside q/).
	lr, err := q.cli.Grant(ctx, 120)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.cli.Revoke(context.Background(), lr.ID) })
	if _, err := q.cli.Put(ctx, q.cfg.Prefix+"/other/q/"+strconv.FormatInt(int64(lr.ID), 16), "x", clientv3.WithLease(lr.ID)); err != nil {
		t.Fatal(err)
	}
	claim := ticket("planted")
	claim.Resource = q.resource
	claim.Granted = time.Now()
	val := encode(claim)
	dir := q.ticketDir()
	keys := []struct {
		key, val string
		lease    clientv3.LeaseID
	}{
		{dir + "!", "garbage", 0}, // garbage, sorts first by name too
		{dir + "1", val, 0},       // no lease
		{dir + strconv.FormatInt(int64(lr.ID)+1, 16), val, lr.ID},                // a lease its name does not claim
		{dir + strconv.FormatInt(int64(lr.ID), 16) + "/x", val, lr.ID},           // outside the layout
		{dir + "0" + strconv.FormatInt(int64(lr.ID), 16), val, lr.ID},            // not the canonical name of its lease
		{dir + strings.ToUpper(strconv.FormatInt(int64(lr.ID), 16)), val, lr.ID}, // nor this
		{dir, val, 0}, // the directory itself
	}
	var out []string
	for _, k := range keys {
		var opts []clientv3.OpOption
		if k.lease != 0 {
			opts = append(opts, clientv3.WithLease(k.lease))
		}
		if _, err := q.cli.Put(ctx, k.key, k.val, opts...); err != nil {
			t.Fatal(err)
		}
		out = append(out, k.key)
	}
	return out
}

// Planted keys ahead of every hold: the first hold is granted at once, the
// next after it, each key is skipped and reported once however many
// times the line is read, and Status lists them.
func TestPlantedKeysSkipped(t *testing.T) {
	s := etcdtest.Start(t)
	for _, budget := range []int{1, 2} {
		t.Run(fmt.Sprint("budget", budget), func(t *testing.T) {
			q, warns := openWarned(t, s, fmt.Sprint("/planted", budget), budget)
			planted := plant(t, q)
			var holds []queue.Grant
			for i := 0; i < budget; i++ {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				g, err := enqueue(t, q, fmt.Sprint("a", i)).Wait(ctx, nil)
				cancel()
				if err != nil {
					t.Fatalf("a hold behind planted keys: %v", err)
				}
				holds = append(holds, g)
			}
			cb := grantAsync(enqueue(t, q, "b"))
			notYet(t, cb, "b")
			st, err := q.Status()
			if err != nil || st.Holder == nil || st.Holder.Label != "a0" || len(st.Skipped) != len(planted) {
				t.Fatalf("status %+v %v, want a0 holding and %d skipped", st, err, len(planted))
			}
			holds[0].Release()
			got(t, cb, "b").Release()
			for _, g := range holds[1:] {
				g.Release()
			}
			for _, k := range planted {
				if n := warns.count(k); n != 1 {
					t.Errorf("key %q reported %d times, want once", k, n)
				}
			}
		})
	}
}

// A holder's ticket rewritten onto no lease (by anyone who may write the
// prefix): the holder loses the token at once, and when it is gone (its
// lease revoked, which no longer takes the key), the waiter goes ahead
// instead of waiting for ever, and is handed the dead holder of its host.
func TestRewrittenTicketNoWedge(t *testing.T) {
	s := etcdtest.Start(t)
	for _, budget := range []int{1, 2} {
		t.Run(fmt.Sprint("budget", budget), func(t *testing.T) {
			q, _ := openWarned(t, s, fmt.Sprint("/rewritten", budget), budget)
			a := enqueue(t, q, "a")
			ga := got(t, grantAsync(a), "a").(*grant)
			var others []queue.Grant
			for i := 1; i < budget; i++ {
				others = append(others, got(t, grantAsync(enqueue(t, q, fmt.Sprint("o", i))), "other"))
			}
			cb := grantAsync(enqueue(t, q, "b"))
			notYet(t, cb, "b")
			ctx, cancel := q.ctx(nil)
			defer cancel()
			// a will die holding: its held key names a holder not alive.
			dead := ga.w.t
			dead.Holder = proc.Ident{PID: 1 << 30, Start: 1}
			q.cli.Put(ctx, q.heldKey(ga.rev), encode(dead))
			resp, err := q.cli.Get(ctx, ga.w.key)
			if err != nil || len(resp.Kvs) != 1 {
				t.Fatalf("reading a's ticket: %v", err)
			}
			if _, err := q.cli.Put(ctx, ga.w.key, string(resp.Kvs[0].Value)); err != nil {
				t.Fatal(err)
			}
			select {
			case li := <-ga.Lost():
				if !strings.Contains(li.Reason, "overwritten") {
					t.Errorf("lost, reason %q", li.Reason)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the holder's ticket was rewritten onto no lease: the token was never lost")
			}
			// a dies holding: its lease goes, its (now leaseless) key stays.
			close(ga.stop)
			ga.w.s.close(time.Second)
			gb := got(t, cb, "b")
			if d := gb.Dead(); len(d) != 1 || d[0].Seq != a.Ticket().Seq {
				t.Errorf("dead holders handed to b: %+v, want a (ticket %d)", d, a.Ticket().Seq)
			}
			gb.Release()
			for _, g := range others {
				g.Release()
			}
		})
	}
}
