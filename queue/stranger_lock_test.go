// stranger_lock_test.go owns the tests of a ticket's lock held by a
// process that is not its holder: a dead holder's ticket kept locked by a
// stranger is still a dead holder, a dead waiter's is still skipped, and a
// forged ticket naming another user's live holder is no holder.
package queue

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/proc"
)

// strangerLock takes LOCK_EX on ticket seq's file through an fd of its
// own, as soon as the owner's lock lets it; the returned channel is
// closed once it has it.
func strangerLock(t *testing.T, q *testQueue, seq uint64) <-chan struct{} {
	f, err := os.Open(filepath.Join(q.path, ticketName(seq)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	got := make(chan struct{})
	go func() {
		if unix.Flock(int(f.Fd()), unix.LOCK_EX) == nil {
			close(got)
		}
	}()
	return got
}

func waitLocked(t *testing.T, got <-chan struct{}) {
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the stranger never got the dead ticket's lock")
	}
}

// A holder SIGKILLed while a stranger waits on its ticket's lock: the
// stranger holds the lock from the holder's death on, and the successor
// must still be handed the dead holder (else it runs beside its lineage).
func TestStrangerLockKeepsNoDeadHolderAlive(t *testing.T) {
	dir := t.TempDir()
	q := openQ(t, dir, "gpu")
	h := startHelper(t, "hold", dir, "gpu", helperOpts{label: "victim"})
	s := h.seq("ticket")
	h.seq("granted")
	got := strangerLock(t, q, s)
	h.kill()
	waitLocked(t, got)
	g := take(t, q, "successor")
	defer g.Release()
	if d := g.Dead(); len(d) != 1 || d[0].Seq != s {
		t.Fatalf("the successor was handed %+v, want the dead holder %d whose ticket a stranger keeps locked", d, s)
	}
}

// A waiter SIGKILLed while a stranger waits on its ticket's lock: the
// waiter behind it takes the token.
func TestStrangerLockKeepsNoDeadWaiterAhead(t *testing.T) {
	dir := t.TempDir()
	q := openQ(t, dir, "gpu")
	h := startHelper(t, "enqueue", dir, "gpu", helperOpts{label: "ahead"})
	s := h.seq("ticket")
	got := strangerLock(t, q, s)
	h.kill()
	waitLocked(t, got)
	w, err := q.Enqueue(Ticket{Label: "behind"})
	if err != nil {
		t.Fatal(err)
	}
	g, err := w.Wait(ctxT(t, 5*time.Second), nil)
	if err != nil {
		t.Fatalf("a dead waiter whose ticket a stranger keeps locked kept the next from the token: %v", err)
	}
	g.Release()
}

// Another user's ticket, granted and kept locked by its forger, that names
// a live holder of ours (pid and start time): it is skipped as forged, and
// the real holder is the one shown.
func TestForgedTicketNamingAnotherUsersHolder(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the forged ticket belongs to another uid")
	}
	dir := sharedDir(t)
	q := openQ(t, dir, "gpu")
	for range 2 { // the holder's ticket is then at least 3: room below it
		w, err := q.Enqueue(Ticket{Label: "filler"})
		if err != nil {
			t.Fatal(err)
		}
		w.Cancel()
	}
	h := startHelper(t, "hold", dir, "gpu", helperOpts{label: "real"})
	s := h.seq("ticket")
	h.seq("granted")
	st, err := proc.ReadStat(h.cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	const forger = 65534
	// It claims the reader's pid namespace (its holder can be asked about:
	// it is forged), none (an earlier version's), or another: in none of
	// them is it the holder.
	for _, ns := range []uint64{ownPidNS(), 0, ownPidNS() + 1} {
		f := plantLocked(t, q, Ticket{Seq: 1, Resource: "gpu", UID: forger, Holder: st.Ident, PidNS: ns, Label: "forged", Created: time.Now(), Granted: time.Now()}, forger)
		status, err := q.Status()
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if status.Holder == nil || status.Holder.Seq != s {
			t.Fatalf("pid ns %d: the holder shown is %+v, want ticket %d (a forged ticket of uid %d names its process)", ns, status.Holder, s, forger)
		}
		if forged := len(status.Skipped) == 1 && status.Skipped[0] == ticketName(1); ns == ownPidNS() && !forged {
			t.Errorf("skipped %v, want the forged ticket reported", status.Skipped)
		}
	}
	h.finish()
}

// A ticket's label is its writer's text, and Describe reaches root's
// errors and output: its control characters are shown, never acted on.
func TestDescribeShowsNoControlCharacters(t *testing.T) {
	d := Ticket{Seq: 3, Label: "x\x1b]0;PWNED\x07\x1b[2J\u009b31m"}.Describe()
	if strings.ContainsAny(d, "\x1b\x07\u009b") || !strings.HasPrefix(d, "x") {
		t.Errorf("Describe() = %q", d)
	}
}

// A ticket of a holder in another pid namespace (a container sharing the
// directory), or of an earlier version (which names none, and may be a
// container's), names a pid this reader cannot ask about: its lock alone
// says it is alive, and the waiter behind it waits.
func TestTicketOfAnotherPidNamespace(t *testing.T) {
	for _, ns := range []uint64{ownPidNS() + 1, 0} {
		q := openQ(t, t.TempDir(), "gpu")
		// Its holder, in its namespace, keeps it locked.
		plantLocked(t, q, Ticket{Seq: 1, Resource: "gpu", UID: os.Geteuid(), Holder: proc.Ident{PID: 1 << 22, Start: 7}, PidNS: ns, Label: "container", Created: time.Now()}, os.Geteuid())
		if st, _ := q.Status(); len(st.Waiters) != 1 {
			t.Errorf("pid ns %d: waiters %+v, want the other namespace's ticket", ns, st.Waiters)
		}
		w, err := q.Enqueue(Ticket{Label: "behind"})
		if err != nil {
			t.Fatal(err)
		}
		if g, err := w.Wait(ctxT(t, 300*time.Millisecond), nil); err == nil {
			g.Release()
			t.Fatalf("pid ns %d: took the token past a live ticket whose holder's pid was asked about here", ns)
		}
		w.Cancel()
	}
}

// A granted ticket, kept locked, that names a live process of its user
// holding no lock of the queue (what a payload can make of its own
// ticket, a pool hold's device ticket among them) is a dead holder;
// unless /proc/locks cannot be read, when nothing is known to hold
// nothing.
func TestUnheldGrantedTicketIsDead(t *testing.T) {
	q := openQ(t, t.TempDir(), "gpu")
	plantLocked(t, q, Ticket{Seq: 1, Resource: "gpu", UID: os.Geteuid(), Holder: sleeperIdent(t), PidNS: ownPidNS(), Label: "unheld", Created: time.Now(), Granted: time.Now()}, os.Geteuid())
	if s, _ := q.Status(); len(s.Dead) != 1 || !s.Dead[0].Unheld {
		t.Errorf("dead %+v, want the unheld granted ticket", s.Dead)
	}
	dq := openQ(t, t.TempDir(), "gpu.d1") // a pool device's queue
	plantLocked(t, dq, Ticket{Seq: 1, Resource: "gpu.d1", UID: os.Geteuid(), Holder: sleeperIdent(t), PidNS: ownPidNS(), PoolSeq: 4, Label: "unheld device", Created: time.Now(), Granted: time.Now()}, os.Geteuid())
	if s, _ := dq.Status(); len(s.Dead) != 1 || !s.Dead[0].Unheld {
		t.Errorf("device queue: dead %+v, want the unheld granted device ticket", s.Dead)
	}
	old := lockTable
	lockTable = filepath.Join(t.TempDir(), "no-locks")
	defer func() { lockTable = old }()
	if s, _ := q.Status(); len(s.Dead) != 0 {
		t.Errorf("dead %+v without /proc/locks: nothing is known to hold nothing", s.Dead)
	}
}

// sleeperIdent starts a process that sleeps until the test ends and
// returns its identity.
func sleeperIdent(t *testing.T) proc.Ident {
	t.Helper()
	c := exec.Command("sleep", "60")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	st, err := proc.ReadStat(c.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	return st.Ident
}

// plantLocked writes tk as ticket tk.Seq's file (owned by uid) and keeps
// it locked, as its writer's live process would, until the test ends or
// the returned file is closed.
func plantLocked(t *testing.T, q *testQueue, tk Ticket, uid int) *os.File {
	t.Helper()
	b, _ := json.Marshal(tk)
	path := filepath.Join(q.path, ticketName(tk.Seq))
	os.Remove(path)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, uid, uid); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	return f
}
