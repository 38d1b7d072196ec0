// queue_test.go owns the tests of ordering and exclusivity: FIFO with many
// concurrent waiters, never two holders, two resources, progress reports,
// the wait allowance, removal while waiting and cancelling.
package queue

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// testQueue opens resource res in dir and collects its warnings.
type testQueue struct {
	*dirQueue
	mu    sync.Mutex
	warns []string
}

func openQ(t *testing.T, dir, res string) *testQueue {
	t.Helper()
	tq := &testQueue{}
	q, err := OpenDir(dir, res, DirOptions{Warn: func(m string) {
		tq.mu.Lock()
		tq.warns = append(tq.warns, m)
		tq.mu.Unlock()
	}})
	if err != nil {
		t.Fatalf("OpenDir: %v", err)
	}
	tq.dirQueue = q.(*dirQueue)
	t.Cleanup(func() { tq.Close() })
	return tq
}

// warnings returns the warnings that mention s.
func (tq *testQueue) warnings(s string) []string {
	tq.mu.Lock()
	defer tq.mu.Unlock()
	var out []string
	for _, w := range tq.warns {
		if strings.Contains(w, s) {
			out = append(out, w)
		}
	}
	return out
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// take enqueues and waits (bounded: a hang fails the test).
func take(t *testing.T, q Queue, label string) Grant {
	t.Helper()
	w, err := q.Enqueue(Ticket{Label: label})
	if err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	g, err := w.Wait(ctxT(t, 10*time.Second), nil)
	if err != nil {
		t.Fatalf("Wait(%s): %v", label, err)
	}
	return g
}

// ticketFiles lists the t.* files left in the resource dir.
func ticketFiles(t *testing.T, q *testQueue) []string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(q.path, "t.*"))
	return m
}

func TestFIFOManyWaiters(t *testing.T) {
	dir := t.TempDir()
	q := openQ(t, dir, "gpu")
	const n = 16
	var inside, maxInside atomic.Int32
	var mu sync.Mutex
	var order []uint64
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			qq := Queue(q)
			if i%2 == 0 { // half through handles of their own
				var err error
				if qq, err = OpenDir(dir, "gpu", DirOptions{}); err != nil {
					errs <- err
					return
				}
				defer qq.(*dirQueue).Close()
			}
			<-start
			w, err := qq.Enqueue(Ticket{Label: "w"})
			if err != nil {
				errs <- err
				return
			}
			g, err := w.Wait(ctxT(t, 20*time.Second), nil)
			if err != nil {
				errs <- err
				return
			}
			in := inside.Add(1)
			if in > maxInside.Load() {
				maxInside.Store(in)
			}
			mu.Lock()
			order = append(order, g.Ticket().Seq)
			mu.Unlock()
			time.Sleep(2 * time.Millisecond)
			inside.Add(-1)
			if err := g.Release(); err != nil {
				errs <- err
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if maxInside.Load() != 1 {
		t.Errorf("%d holders at once", maxInside.Load())
	}
	if len(order) != n {
		t.Fatalf("%d grants, want %d", len(order), n)
	}
	for i := 1; i < n; i++ {
		if order[i] <= order[i-1] {
			t.Fatalf("grants out of ticket order: %v", order)
		}
	}
	if f := ticketFiles(t, q); len(f) != 0 {
		t.Errorf("tickets left behind: %v", f)
	}
	st, err := q.Status()
	if err != nil || st.Holder != nil || len(st.Waiters) != 0 {
		t.Errorf("status after drain: %+v, %v", st, err)
	}
}

func TestSeqIncreasesAfterDrain(t *testing.T) {
	q := openQ(t, t.TempDir(), "gpu")
	g := take(t, q, "a")
	s1 := g.Ticket().Seq
	g.Release()
	g = take(t, q, "b")
	defer g.Release()
	if g.Ticket().Seq <= s1 {
		t.Errorf("seq %d after %d: numbers must not be reused when the queue drains", g.Ticket().Seq, s1)
	}
}

func TestTwoResourcesIndependent(t *testing.T) {
	dir := t.TempDir()
	gpu := openQ(t, dir, "gpu")
	npu := openQ(t, dir, "npu")
	g := take(t, gpu, "gpu-holder")
	defer g.Release()
	// With gpu's token held, npu's is free.
	g2 := take(t, npu, "npu-holder")
	g2.Release()
	// And a gpu waiter is still blocked.
	w, _ := gpu.Enqueue(Ticket{Label: "gpu-waiter"})
	_, err := w.Wait(ctxT(t, 100*time.Millisecond), nil)
	var wt *WaitTimeout
	if !errors.As(err, &wt) {
		t.Fatalf("gpu waiter got %v while gpu was held", err)
	}
}

func TestWaitTimeoutRemovesTicket(t *testing.T) {
	q := openQ(t, t.TempDir(), "gpu")
	g := take(t, q, "bench-a")
	defer g.Release()
	w, err := q.Enqueue(Ticket{Label: "bench-b"})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	_, err = w.Wait(ctxT(t, 300*time.Millisecond), nil)
	var wt *WaitTimeout
	if !errors.As(err, &wt) {
		t.Fatalf("Wait: %v, want *WaitTimeout", err)
	}
	if wt.Holder == nil || wt.Holder.Seq != g.Ticket().Seq || wt.Waited < 250*time.Millisecond {
		t.Errorf("timeout %+v: want the holder %d and the time waited", wt, g.Ticket().Seq)
	}
	if !strings.Contains(err.Error(), "bench-a") {
		t.Errorf("message %q does not name the holder", err)
	}
	if time.Since(t0) > 5*time.Second {
		t.Errorf("Wait returned %v after its deadline", time.Since(t0))
	}
	if _, err := os.Lstat(filepath.Join(q.path, ticketName(w.Ticket().Seq))); !os.IsNotExist(err) {
		t.Errorf("ticket left after the allowance ran out: %v", err)
	}
}

func TestContextCancelRemovesTicket(t *testing.T) {
	q := openQ(t, t.TempDir(), "gpu")
	g := take(t, q, "a")
	defer g.Release()
	w, _ := q.Enqueue(Ticket{Label: "b"})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	if _, err := w.Wait(ctx, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait: %v, want context.Canceled", err)
	}
	if st, _ := q.Status(); len(st.Waiters) != 0 {
		t.Errorf("waiters left: %+v", st.Waiters)
	}
}

func TestRemovedWhileWaiting(t *testing.T) {
	for _, how := range []string{"cancel", "rm"} {
		t.Run(how, func(t *testing.T) {
			q := openQ(t, t.TempDir(), "gpu")
			g := take(t, q, "a")
			defer g.Release()
			w, _ := q.Enqueue(Ticket{Label: "b"})
			waiting := make(chan struct{}, 1)
			res := make(chan error, 1)
			var removedAt atomic.Int64
			go func() {
				_, err := w.Wait(ctxT(t, 20*time.Second), func(Position) {
					select {
					case waiting <- struct{}{}:
					default:
					}
				})
				res <- err
			}()
			<-waiting
			time.Sleep(20 * time.Millisecond) // let it sleep in poll
			removedAt.Store(time.Now().UnixNano())
			if how == "cancel" {
				if err := q.Cancel(w.Ticket().Seq, os.Getuid()); err != nil {
					t.Fatal(err)
				}
			} else if err := os.Remove(filepath.Join(q.path, ticketName(w.Ticket().Seq))); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-res:
				if !errors.Is(err, ErrRemoved) {
					t.Fatalf("Wait: %v, want ErrRemoved", err)
				}
				if d := time.Duration(time.Now().UnixNano() - removedAt.Load()); d > time.Second {
					t.Errorf("removal noticed after %v, want well under a second", d)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Wait did not notice its ticket was removed")
			}
		})
	}
}

func TestProgress(t *testing.T) {
	q := openQ(t, t.TempDir(), "gpu")
	g := take(t, q, "holder")
	w1, _ := q.Enqueue(Ticket{Label: "w1"})
	w2, _ := q.Enqueue(Ticket{Label: "w2"})
	w3, _ := q.Enqueue(Ticket{Label: "w3"})
	pos := make(chan Position, 16)
	res := make(chan error, 1)
	go func() {
		g3, err := w3.Wait(ctxT(t, 20*time.Second), func(p Position) { pos <- p })
		if err == nil {
			g3.Release()
		}
		res <- err
	}()
	next := func(ahead int, holder uint64) {
		t.Helper()
		select {
		case p := <-pos:
			if p.Ahead != ahead || (holder == 0) != (p.Holder == nil) || (p.Holder != nil && p.Holder.Seq != holder) {
				t.Fatalf("position %+v (holder %v), want ahead %d holder %d", p, p.Holder, ahead, holder)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no progress report (want ahead %d)", ahead)
		}
	}
	next(2, g.Ticket().Seq)
	w1.Cancel()
	next(1, g.Ticket().Seq)
	w2.Cancel()
	next(0, g.Ticket().Seq)
	g.Release()
	if err := <-res; err != nil {
		t.Fatal(err)
	}
}

func TestCancelRules(t *testing.T) {
	q := openQ(t, t.TempDir(), "gpu")
	g := take(t, q, "holder")
	defer g.Release()
	w, _ := q.Enqueue(Ticket{Label: "waiter"})
	seq := w.Ticket().Seq
	if err := q.Cancel(seq, 4242); !errors.Is(err, ErrNotOwner) {
		t.Errorf("cancel by uid 4242: %v, want ErrNotOwner", err)
	}
	if _, err := os.Lstat(filepath.Join(q.path, ticketName(seq))); err != nil {
		t.Errorf("refused cancel removed the ticket: %v", err)
	}
	if err := q.Cancel(g.Ticket().Seq, 0); !errors.Is(err, ErrHolding) {
		t.Errorf("cancel of the holder: %v, want ErrHolding", err)
	}
	if err := q.Cancel(seq+100, 0); !errors.Is(err, ErrNoTicket) {
		t.Errorf("cancel of no ticket: %v, want ErrNoTicket", err)
	}
	if err := q.Cancel(seq, os.Geteuid()); err != nil {
		t.Errorf("cancel by owner: %v", err)
	}
	if err := w.Cancel(); err != nil {
		t.Errorf("Cancel after removal: %v (must be idempotent)", err)
	}
}

func TestValidResource(t *testing.T) {
	for _, bad := range []string{"", ".", "..", "a/b", "../gpu", ".hidden", strings.Repeat("x", 65), "gpu 0"} {
		if _, err := OpenDir(t.TempDir(), bad, DirOptions{}); err == nil || !strings.Contains(err.Error(), "resource name") {
			t.Errorf("resource %q: %v", bad, err)
		}
	}
	for _, good := range []string{"gpu", "npu0", "gpu-1", "a.b_c"} {
		if err := ValidResource(good); err != nil {
			t.Errorf("%q: %v", good, err)
		}
	}
}

// Without inotify (a user over fs.inotify.max_user_instances) the queue
// still works, degraded to pidfds and a short re-check, and says so once.
func TestNoInotifyDegrades(t *testing.T) {
	inotifyInit = func(int) (int, error) { return -1, unix.EMFILE }
	defer func() { inotifyInit = unix.InotifyInit1 }()
	q := openQ(t, t.TempDir(), "gpu")
	g := take(t, q, "a")
	w, _ := q.Enqueue(Ticket{Label: "b"})
	res := make(chan error, 1)
	go func() {
		g2, err := w.Wait(ctxT(t, 20*time.Second), nil)
		if err == nil {
			g2.Release()
		}
		res <- err
	}()
	time.Sleep(50 * time.Millisecond)
	g.Release()
	if err := <-res; err != nil {
		t.Fatal(err)
	}
	// Removal is still noticed (by the re-check).
	g = take(t, q, "c")
	defer g.Release()
	w, _ = q.Enqueue(Ticket{Label: "d"})
	go func() {
		_, err := w.Wait(ctxT(t, 20*time.Second), nil)
		res <- err
	}()
	time.Sleep(50 * time.Millisecond)
	q.Cancel(w.Ticket().Seq, 0)
	select {
	case err := <-res:
		if !errors.Is(err, ErrRemoved) {
			t.Fatalf("Wait: %v, want ErrRemoved", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("removal not noticed without inotify")
	}
	if w := q.warnings("inotify"); len(w) != 1 {
		t.Errorf("inotify fallback reported %d times: %q", len(w), w)
	}
}

func TestLongCommandClipped(t *testing.T) {
	q := openQ(t, t.TempDir(), "gpu")
	big := strings.Repeat("x", 100<<10)
	w, err := q.Enqueue(Ticket{Label: big, Cmd: []string{"run", big, "a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Cancel()
	st, _ := q.Status()
	if len(st.Waiters) != 1 || st.Waiters[0].Seq != w.Ticket().Seq {
		t.Fatalf("a ticket with a 100 KiB command is not readable: %+v, warnings %q", st, q.warns)
	}
	if c := st.Waiters[0].Cmd; len(c) != 3 || c[0] != "run" || c[2] != "(2 more arguments)" || len(st.Waiters[0].Label) > 260 {
		t.Errorf("clipped to %d args %q...", len(c), c[0])
	}
}
