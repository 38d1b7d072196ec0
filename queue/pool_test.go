// pool_test.go tests the pool queue: all or nothing, strict FIFO, backfill
// only when it provably ends before the head, and a dead holder of several
// devices handed over once and cleared from every device.
package queue

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func devNames(res string, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("%s.d%d", res, i))
	}
	return out
}

func openPool(t *testing.T, dir string, n int, backfill bool) *Pool {
	t.Helper()
	p, err := OpenPool(dir, "gpu", devNames("gpu", n), backfill, DirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// poolWait enqueues a ticket for n devices (bound b) and waits in the
// background; the grant arrives on the channel.
func poolWait(t *testing.T, p *Pool, label string, n int, b time.Duration) (*PoolWaiter, chan *PoolGrant) {
	t.Helper()
	w, err := p.Enqueue(Ticket{Label: label, HoldID: "hold-" + label, Count: n, Bound: b})
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan *PoolGrant, 1)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		g, err := w.Wait(ctx, nil)
		if err != nil {
			if ctx.Err() == nil {
				t.Errorf("%s: %v", label, err)
			}
			close(ch)
			return
		}
		ch <- g
	}()
	return w, ch
}

func granted(t *testing.T, ch chan *PoolGrant, label string) *PoolGrant {
	t.Helper()
	select {
	case g := <-ch:
		if g == nil {
			t.Fatalf("%s: wait failed", label)
		}
		return g
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: not granted within 20s", label)
	}
	return nil
}

// waiting checks that the waiter has not been granted by the time the
// pool's listing says it waits: it has run a round since it was enqueued.
func waiting(t *testing.T, p *Pool, w *PoolWaiter, ch chan *PoolGrant, label string) {
	t.Helper()
	for range 2000 {
		if w.Waiting() != "" {
			break
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case g := <-ch:
		t.Fatalf("%s was granted devices %v; it must wait", label, g.Devices())
	default:
	}
	if w.Waiting() == "" {
		t.Fatalf("%s never ran a round", label)
	}
}

func TestPoolAllOrNothing(t *testing.T) {
	p := openPool(t, t.TempDir(), 4, true)
	_, ach := poolWait(t, p, "a", 3, 0)
	a := granted(t, ach, "a")
	if got := a.Devices(); len(got) != 3 {
		t.Fatalf("a got %v, want 3 devices", got)
	}
	bw, bch := poolWait(t, p, "b", 2, 0)
	waiting(t, p, bw, bch, "b")
	if !strings.Contains(bw.Waiting(), "1 free") {
		t.Fatalf("b says %q", bw.Waiting())
	}
	// b took nothing while it waited: the free device has no holder.
	_, states, _ := p.view()
	free := 0
	for _, s := range states {
		if s.Free {
			free++
		}
	}
	if free != 1 {
		t.Fatalf("%d devices free while b waits; a partial hold?", free)
	}
	a.Release()
	b := granted(t, bch, "b")
	if len(b.Devices()) != 2 {
		t.Fatalf("b got %v", b.Devices())
	}
	b.Release()
}

func TestPoolFIFONoBackfillWithoutBounds(t *testing.T) {
	p := openPool(t, t.TempDir(), 2, true)
	_, ach := poolWait(t, p, "a", 1, 0) // no max hold: the head's start is unknown
	a := granted(t, ach, "a")
	hw, hch := poolWait(t, p, "head", 2, 0)
	waiting(t, p, hw, hch, "head")
	cw, cch := poolWait(t, p, "c", 1, time.Minute)
	waiting(t, p, cw, cch, "c")
	a.Release()
	h := granted(t, hch, "head")
	waiting(t, p, cw, cch, "c")
	h.Release()
	granted(t, cch, "c").Release()
}

func TestPoolBackfill(t *testing.T) {
	p := openPool(t, t.TempDir(), 2, true)
	_, ach := poolWait(t, p, "a", 1, time.Hour)
	a := granted(t, ach, "a")
	hw, hch := poolWait(t, p, "head", 2, 0)
	waiting(t, p, hw, hch, "head")
	long, lch := poolWait(t, p, "long", 1, 2*time.Hour)
	waiting(t, p, long, lch, "long")
	_, sch := poolWait(t, p, "short", 1, time.Minute)
	s := granted(t, sch, "short")
	if !s.Backfilled() {
		t.Fatal("short started before the head but is not marked backfilled")
	}
	s.Release()
	a.Release()
	granted(t, hch, "head").Release()
	granted(t, lch, "long").Release()
}

func TestPoolStrictFIFO(t *testing.T) {
	p := openPool(t, t.TempDir(), 2, false)
	_, ach := poolWait(t, p, "a", 1, time.Hour)
	a := granted(t, ach, "a")
	hw, hch := poolWait(t, p, "head", 2, 0)
	waiting(t, p, hw, hch, "head")
	sw, sch := poolWait(t, p, "short", 1, time.Minute)
	waiting(t, p, sw, sch, "short")
	if !strings.Contains(sw.Waiting(), "backfill is off") {
		t.Fatalf("short says %q", sw.Waiting())
	}
	a.Release()
	granted(t, hch, "head").Release()
	granted(t, sch, "short").Release()
}

// poolHelper is the helper process of a pool hold: it takes QH_COUNT of
// QH_SIZE devices and reports "granted SEQ DEV,DEV" and its dead holders.
func poolHelper(say func(string, ...any), label string) int {
	size, _ := strconv.Atoi(os.Getenv("QH_SIZE"))
	count, _ := strconv.Atoi(os.Getenv("QH_COUNT"))
	p, err := OpenPool(os.Getenv("QH_DIR"), os.Getenv("QH_RES"), devNames(os.Getenv("QH_RES"), size), true, DirOptions{})
	if err != nil {
		say("err %v", err)
		return 1
	}
	w, err := p.Enqueue(Ticket{Label: label, HoldID: "hold-" + label, Record: "/records/" + label, Count: count})
	if err != nil {
		say("err %v", err)
		return 1
	}
	say("ticket %d", w.Ticket().Seq)
	g, err := w.Wait(context.Background(), nil)
	if err != nil {
		say("err %v", err)
		return 1
	}
	var ds []string
	for _, d := range g.Devices() {
		ds = append(ds, strconv.Itoa(d))
	}
	say("granted %d %s", g.Ticket().Seq, strings.Join(ds, ","))
	for _, d := range g.Dead() {
		say("dead %d %s", d.Seq, d.HoldID)
	}
	io.Copy(io.Discard, os.Stdin)
	g.Release()
	return 0
}

func TestPoolDeadHolderHandedOverOnce(t *testing.T) {
	dir := t.TempDir()
	env := []string{"QH_SIZE=3", "QH_COUNT=2"}
	h := startHelper(t, "pool", dir, "gpu", helperOpts{label: "victim", env: env})
	h.expect("ticket")
	if f := h.expect("granted"); f[2] != "0,1" {
		t.Fatalf("victim got %v", f)
	}
	h.kill()
	p := openPool(t, dir, 3, true)
	_, ch := poolWait(t, p, "next", 3, 0)
	g := granted(t, ch, "next")
	dead := g.Dead()
	if len(dead) != 1 || dead[0].HoldID != "hold-victim" {
		t.Fatalf("dead holders %+v; want the victim once, for both its devices", dead)
	}
	if err := g.Reaped(dead[0]); err != nil {
		t.Fatal(err)
	}
	if left, err := g.Unreaped(); err != nil || len(left) != 0 {
		t.Fatalf("unreaped after Reaped: %v %v", left, err)
	}
	for i, dq := range p.devs {
		if s, _ := dq.scan(); len(s.dead()) != 0 {
			t.Fatalf("device %d still lists a dead holder: %+v", i, s.dead())
		}
	}
	g.Release()
}

func TestPoolDeadHolderOnADeviceNotTaken(t *testing.T) {
	dir := t.TempDir()
	h := startHelper(t, "pool", dir, "gpu", helperOpts{label: "victim", env: []string{"QH_SIZE=3", "QH_COUNT=2"}})
	h.expect("ticket")
	h.expect("granted")
	h.kill()
	p := openPool(t, dir, 3, true)
	// One device: device 0, which the victim held; its entry on device 1
	// is cleared too, so the next taker of device 1 reaps nothing twice.
	_, ch := poolWait(t, p, "one", 1, 0)
	g := granted(t, ch, "one")
	if g.Devices()[0] != 0 || len(g.Dead()) != 1 {
		t.Fatalf("got %v, dead %+v", g.Devices(), g.Dead())
	}
	g.Reaped(g.Dead()[0])
	if s, _ := p.devs[1].scan(); len(s.dead()) != 0 {
		t.Fatalf("device 1 still lists the victim: %+v", s.dead())
	}
	_, ch2 := poolWait(t, p, "two", 1, 0)
	g2 := granted(t, ch2, "two")
	if len(g2.Dead()) != 0 {
		t.Fatalf("the victim was handed over twice: %+v", g2.Dead())
	}
	g2.Release()
	g.Release()
}

// TestPoolQuietWaiters: a waiter that can start only in FIFO order (no
// bound) sleeps on the ticket ahead of it alone, so tickets coming and
// going behind it do not wake it, while the head's waiter sees them all.
func TestPoolQuietWaiters(t *testing.T) {
	dir := t.TempDir()
	holder := openPool(t, dir, 2, true)
	_, ach := poolWait(t, holder, "a", 2, 0)
	a := granted(t, ach, "a")
	headPool := openPool(t, dir, 2, true)
	hw, hch := poolWait(t, headPool, "head", 2, 0)
	waiting(t, headPool, hw, hch, "head")
	var quiet []*Pool
	for i := range 3 {
		qp := openPool(t, dir, 2, true)
		w, ch := poolWait(t, qp, fmt.Sprintf("q%d", i), 1, 0)
		waiting(t, qp, w, ch, fmt.Sprintf("q%d", i))
		quiet = append(quiet, qp)
	}
	churn := openPool(t, dir, 2, true)
	before := make([]int64, len(quiet))
	for i, qp := range quiet {
		before[i] = qp.q.wakes.Load()
	}
	// Each ticket coming and going wakes the head's waiter (it waits for
	// that before the next), and none of the quiet ones.
	for range 10 {
		seen := headPool.q.wakes.Load()
		w, err := churn.Enqueue(Ticket{Label: "churn", Count: 1})
		if err != nil {
			t.Fatal(err)
		}
		w.Cancel()
		for i := 0; headPool.q.wakes.Load() == seen; i++ {
			if i > 10000 {
				t.Fatal("the head's waiter did not wake for a ticket coming and going")
			}
			time.Sleep(time.Millisecond)
		}
	}
	for i, qp := range quiet {
		if n := qp.q.wakes.Load() - before[i]; n > 2 {
			t.Errorf("quiet waiter q%d woke %d times for tickets behind it", i, n)
		}
	}
	a.Release()
	granted(t, hch, "head").Release()
}

// TestPoolSeesLockWithoutTicket: a device whose token a process holds with
// no ticket is busy for the pool, and telling so reads no lock table (whose
// read waits for an RCU grace period on every round).
func TestPoolSeesLockWithoutTicket(t *testing.T) {
	p := openPool(t, t.TempDir(), 2, true)
	locker, err := p.devs[1].openToken()
	if err != nil {
		t.Fatal(err)
	}
	defer locker.close()
	if err := unix.Flock(locker.fd, unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	saved := lockTable
	lockTable = "/nonexistent/locks"
	defer func() { lockTable = saved }()
	_, states, err := p.view()
	if err != nil {
		t.Fatal(err)
	}
	if !states[0].Free || states[1].Free {
		t.Fatalf("states %+v: want device 0 free and device 1, locked without a ticket, busy", states)
	}
}
