// dead_test.go owns the tests of processes that die: a holder SIGKILLed
// while holding is handed to its successor (and on again when the
// successor dies while reaping) until Reaped; a dead waiter is skipped;
// TakeDead; and a foreign dead holder reaped by a third user.
package queue

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestDeadHolderHandedToSuccessor(t *testing.T) {
	dir := t.TempDir()
	q := openQ(t, dir, "gpu")
	h1 := startHelper(t, "hold", dir, "gpu", helperOpts{label: "one"})
	s1 := h1.seq("ticket")
	h1.seq("granted")
	h2 := startHelper(t, "hold", dir, "gpu", helperOpts{label: "two"})
	s2 := h2.seq("ticket")
	w, err := q.Enqueue(Ticket{Label: "three"})
	if err != nil {
		t.Fatal(err)
	}
	res := make(chan Grant, 1)
	errc := make(chan error, 1)
	go func() {
		g, err := w.Wait(ctxT(t, 20*time.Second), nil)
		res <- g
		errc <- err
	}()

	// The holder dies by SIGKILL: the next ticket gets the token and the
	// dead holder's record.
	h1.kill()
	if got := h2.seq("granted"); got != s2 {
		t.Fatalf("helper two granted %d", got)
	}
	d := h2.expect("dead")
	if want := fmt.Sprint(s1); d[1] != want || d[2] != "hold-one" || d[3] != "/records/one" {
		t.Fatalf("successor was handed %v, want dead ticket %d with its hold id and record", d, s1)
	}
	// The successor dies too, before reaping: both are handed on.
	h2.kill()
	g, err := <-res, <-errc
	if err != nil {
		t.Fatal(err)
	}
	dead := g.Dead()
	if len(dead) != 2 || dead[0].Seq != s1 || dead[1].Seq != s2 || dead[1].HoldID != "hold-two" {
		t.Fatalf("Dead() = %+v, want tickets %d and %d", dead, s1, s2)
	}
	if st, _ := q.Status(); len(st.Dead) != 2 {
		t.Errorf("Status().Dead = %+v before Reaped", st.Dead)
	}
	if err := g.Reaped(dead[0]); err != nil {
		t.Fatal(err)
	}
	if st, _ := q.Status(); len(st.Dead) != 1 || st.Dead[0].Seq != s2 {
		t.Errorf("Status().Dead = %+v after reaping %d", st.Dead, s1)
	}
	if err := g.Reaped(dead[1]); err != nil {
		t.Fatal(err)
	}
	if err := g.Reaped(dead[1]); err == nil {
		t.Error("Reaped twice: no error")
	}
	g.Release()
	g = take(t, q, "four")
	defer g.Release()
	if d := g.Dead(); len(d) != 0 {
		t.Errorf("reaped holders handed on again: %+v", d)
	}
	if f := ticketFiles(t, q); len(f) != 1 {
		t.Errorf("ticket files %v, want only the holder's", f)
	}
}

func TestHelpersFIFO(t *testing.T) {
	dir := t.TempDir()
	var hs []*helper
	var seqs []uint64
	for i := range 4 {
		h := startHelper(t, "hold", dir, "gpu", helperOpts{label: fmt.Sprint("p", i)})
		seqs = append(seqs, h.seq("ticket"))
		hs = append(hs, h)
	}
	for i, h := range hs {
		if got := h.seq("granted"); got != seqs[i] {
			t.Fatalf("helper %d granted ticket %d", i, got)
		}
		h.finish()
	}
}

func TestDeadWaiterSkipped(t *testing.T) {
	dir := t.TempDir()
	q := openQ(t, dir, "gpu")
	h := startHelper(t, "enqueue", dir, "gpu", helperOpts{label: "ahead"})
	hs := h.seq("ticket")
	w, _ := q.Enqueue(Ticket{Label: "behind"})
	res := make(chan error, 1)
	var g Grant
	go func() {
		var err error
		g, err = w.Wait(ctxT(t, 20*time.Second), nil)
		res <- err
	}()
	select {
	case err := <-res:
		t.Fatalf("took the token past a live ticket ahead: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	h.kill()
	if err := <-res; err != nil {
		t.Fatal(err)
	}
	defer g.Release()
	if d := g.Dead(); len(d) != 0 {
		t.Errorf("a dead waiter handed on as a dead holder: %+v", d)
	}
	if _, err := os.Lstat(filepath.Join(q.path, ticketName(hs))); !os.IsNotExist(err) {
		t.Errorf("dead waiter's ticket not cleaned up: %v", err)
	}
}

func TestTakeDead(t *testing.T) {
	dir := t.TempDir()
	q := openQ(t, dir, "gpu")
	g, err := q.TakeDead(context.Background(), Ticket{Label: "reap"})
	if err != nil || len(g.Dead()) != 0 {
		t.Fatalf("TakeDead on a free token: %v, %v", g, err)
	}
	if st, _ := q.Status(); st.Holder == nil || st.Holder.Seq != g.Ticket().Seq {
		t.Errorf("TakeDead holder not visible: %+v", st.Holder)
	}
	if _, err := q.TakeDead(context.Background(), Ticket{}); !errors.Is(err, ErrNotDead) {
		t.Errorf("TakeDead with a live holder: %v, want ErrNotDead", err)
	}
	g.Release()

	h := startHelper(t, "hold", dir, "gpu", helperOpts{label: "dies"})
	hs := h.seq("ticket")
	h.seq("granted")
	if _, err := q.TakeDead(context.Background(), Ticket{}); !errors.Is(err, ErrNotDead) {
		t.Errorf("TakeDead with a live helper holding: %v, want ErrNotDead", err)
	}
	h.kill()
	g, err = q.TakeDead(context.Background(), Ticket{Label: "reap"})
	if err != nil {
		t.Fatal(err)
	}
	if d := g.Dead(); len(d) != 1 || d[0].Seq != hs || d[0].Record != "/records/dies" {
		t.Fatalf("TakeDead Dead() = %+v, want ticket %d", d, hs)
	}
	g.Reaped(g.Dead()[0])
	g.Release()
	if st, _ := q.Status(); len(st.Dead) != 0 || st.Holder != nil {
		t.Errorf("status after reap: %+v", st)
	}
}

// A holder of one uid dies; a successor of another uid (not root) may not
// remove its ticket from the sticky dir, so Reaped leaves a marker. That
// marker does not count (ESCAPES T2): only root or the dead holder's own
// user may say its lineage was ended, so the next holder is handed the dead
// one again, and root's reap clears the ticket and the stray marker.
func TestForeignDeadHolderReaped(t *testing.T) {
	dir := sharedDir(t)
	if err := os.Mkdir(filepath.Join(dir, "gpu"), 0o1777); err != nil {
		t.Fatal(err)
	}
	unix.Chmod(filepath.Join(dir, "gpu"), 0o1777)
	q := openQ(t, dir, "gpu")
	h1 := startHelper(t, "hold", dir, "gpu", helperOpts{uid: 65534, label: "nobody"})
	s1 := h1.seq("ticket")
	h1.seq("granted")
	h2 := startHelper(t, "reap", dir, "gpu", helperOpts{uid: 1000, label: "other"})
	h2.seq("ticket")
	h1.kill()
	h2.seq("granted")
	if got := h2.seq("dead"); got != s1 {
		t.Fatalf("successor handed dead %d, want %d", got, s1)
	}
	if got := h2.seq("reaped"); got != s1 {
		t.Fatalf("reaped %d", got)
	}
	if _, err := os.Lstat(filepath.Join(q.path, ticketName(s1))); err != nil {
		t.Fatalf("uid 1000 removed uid 65534's ticket from a sticky dir?! %v", err)
	}
	if m, _ := filepath.Glob(filepath.Join(q.path, "reaped.*")); len(m) != 1 {
		t.Fatalf("reaped markers %v, want one", m)
	}
	if st, _ := q.Status(); len(st.Dead) != 1 {
		t.Errorf("another user's marker hid the dead holder: status dead %+v", st.Dead)
	}
	h2.finish()
	g := take(t, q, "root")
	defer g.Release()
	d := g.Dead()
	if len(d) != 1 || d[0].Seq != s1 {
		t.Fatalf("root's grant was handed %+v, want the dead holder %d again", d, s1)
	}
	if err := g.Reaped(d[0]); err != nil {
		t.Fatal(err)
	}
	g.Release()
	g = take(t, q, "root")
	defer g.Release()
	// Root's grant tidied the reaped ticket and its marker away.
	if m, _ := filepath.Glob(filepath.Join(q.path, "reaped.*")); len(m) != 0 {
		t.Errorf("markers left: %v", m)
	}
	if _, err := os.Lstat(filepath.Join(q.path, ticketName(s1))); !os.IsNotExist(err) {
		t.Errorf("reaped ticket left: %v", err)
	}
}
