// hostile_test.go owns the tests of a shared directory with hostile or
// broken content: symlinks planted at the token, a ticket path or the
// resource dir; garbage, empty, truncated, forged and special files; a
// replaced token file; other users cancelling; directory modes.
package queue

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/safefs"
	"github.com/gpu-hold/gpu-hold/internal/testenv"
)

// lockedInodes returns the inodes /proc/locks shows locked.
func lockedInodes(t *testing.T) map[string]bool {
	t.Helper()
	f, err := os.Open("/proc/locks")
	if err != nil {
		testenv.Need(t, "no /proc/locks: %v", err)
	}
	defer f.Close()
	out := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) >= 6 && fs[1] == "FLOCK" {
			out[fs[5]] = true
		}
	}
	return out
}

func inodeKey(t *testing.T, path string) string {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%02x:%02x:%d", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
}

func TestSymlinksNeverFollowed(t *testing.T) {
	dir := t.TempDir()
	res := filepath.Join(dir, "gpu")
	os.Mkdir(res, 0o755)
	elsewhere := t.TempDir()
	victim := filepath.Join(elsewhere, "precious")
	os.WriteFile(victim, []byte("precious\n"), 0o600)
	absent := filepath.Join(elsewhere, "absent")
	// Planted before first use: at the token, at the next ticket, at the counter.
	os.Symlink(victim, filepath.Join(res, "token"))
	os.Symlink(absent, filepath.Join(res, ticketName(1)))
	os.Symlink(victim, filepath.Join(res, "seq"))

	q := openQ(t, dir, "gpu")
	g := take(t, q, "a")
	if g.Ticket().Seq == 1 {
		t.Fatal("took ticket 1 where a symlink was planted")
	}
	if lockedInodes(t)[inodeKey(t, victim)] {
		t.Error("the symlink's target was locked")
	}
	var st unix.Stat_t
	unix.Lstat(filepath.Join(res, "token"), &st)
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		t.Errorf("token is %s", safefs.Kind(st.Mode))
	}
	g.Release()
	g = take(t, q, "b")
	g.Release()
	if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
		t.Errorf("symlink target written: %q", b)
	}
	if _, err := os.Lstat(absent); !os.IsNotExist(err) {
		t.Errorf("dangling symlink's target created: %v", err)
	}
	if len(q.warnings("symlink")) == 0 {
		t.Errorf("planted symlinks not reported: %q", q.warns)
	}
	if w := q.warnings(ticketName(1)); len(w) != 1 {
		t.Errorf("symlink at a ticket path reported %d times: %q", len(w), w)
	}
}

func TestSymlinkResourceDirRefused(t *testing.T) {
	dir := t.TempDir()
	os.Symlink(t.TempDir(), filepath.Join(dir, "gpu"))
	_, err := OpenDir(dir, "gpu", DirOptions{})
	if err == nil || !strings.Contains(err.Error(), "symlink") || !strings.Contains(err.Error(), "remove it") {
		t.Fatalf("OpenDir through a symlinked resource dir: %v", err)
	}
}

func TestGarbageReportedOnceQueueWorks(t *testing.T) {
	dir := t.TempDir()
	res := filepath.Join(dir, "gpu")
	os.Mkdir(res, 0o755)
	valid, _ := json.Marshal(Ticket{Seq: 9, Resource: "gpu", UID: 1000, Holder: procSelf(t), Label: "forged", Created: time.Now()})
	truncated, _ := json.Marshal(Ticket{Seq: 10, Resource: "gpu", UID: 0, Holder: procSelf(t), Label: "trunc", Created: time.Now(), Granted: time.Now()})
	files := map[string][]byte{
		"README":                         []byte("hello\n"),
		ticketName(5):                    nil,                          // empty
		ticketName(6):                    []byte("\x00\xffgarbage{{{"), // garbage
		ticketName(9):                    valid,                        // claims uid 1000, owned by us
		ticketName(10):                   truncated[:len(truncated)/2], // a holder's file, truncated
		"reaped.00000000000000000004.xx": []byte("nope"),
		"token":                          []byte("corrupted token contents\n"),
		"seq":                            []byte("not a number at all\n"),
	}
	if os.Geteuid() != 0 {
		delete(files, ticketName(9))
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(res, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Mkfifo(filepath.Join(res, ticketName(7)), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(res, ticketName(8)), 0o755)

	q := openQ(t, dir, "gpu")
	for i := range 3 { // several scans: each problem reported once
		done := make(chan Grant, 1)
		go func() { done <- take(t, q, fmt.Sprint("run", i)) }()
		select {
		case g := <-done:
			if g.Ticket().Seq <= 10 {
				t.Errorf("ticket %d collides with the junk", g.Ticket().Seq)
			}
			g.Release()
		case <-time.After(15 * time.Second):
			t.Fatal("queue stalled on garbage")
		}
	}
	st, err := q.Status()
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"README", ticketName(5), ticketName(6), ticketName(7), ticketName(8), ticketName(10), "reaped.00000000000000000004.xx"}
	if os.Geteuid() == 0 {
		names = append(names, ticketName(9))
	}
	for _, n := range names {
		if w := q.warnings(n); len(w) != 1 {
			t.Errorf("%s reported %d times: %q", n, len(w), w)
		}
		found := false
		for _, s := range st.Skipped {
			found = found || s == n
		}
		if !found {
			t.Errorf("%s not in Status().Skipped %v", n, st.Skipped)
		}
	}
	if w := q.warnings(ticketName(9)); os.Geteuid() == 0 && (len(w) != 1 || !strings.Contains(w[0], "forged")) {
		t.Errorf("forged ticket: %q", w)
	}
	if w := q.warnings("/seq"); len(w) != 1 {
		t.Errorf("garbage counter reported %d times: %q", len(w), w)
	}
	if w := q.warnings("/token"); len(w) != 1 {
		t.Errorf("corrupted token reported %d times: %q", len(w), w)
	}
	if st.Holder != nil || len(st.Waiters) != 0 || len(st.Dead) != 0 {
		t.Errorf("junk taken for tickets: %+v", st)
	}
}

func procSelf(t *testing.T) proc.Ident {
	return proc.Ident{PID: os.Getpid(), Start: 1}
}

func TestReplacedTokenNoticed(t *testing.T) {
	q := openQ(t, t.TempDir(), "gpu")
	tl, err := q.openToken()
	if err != nil {
		t.Fatal(err)
	}
	defer tl.close()
	old := tl.ino
	pin, _ := unix.Dup(tl.fd) // keeps the old inode from being reused
	defer unix.Close(pin)
	// The token file is removed and recreated under our open fd.
	os.Remove(filepath.Join(q.path, "token"))
	if got, err := q.tryLock(tl); got || err != nil {
		t.Fatalf("locking a removed token file: got %v, %v", got, err)
	}
	if tl.ino == old {
		t.Fatal("token fd not reopened")
	}
	if got, err := q.tryLock(tl); !got || err != nil {
		t.Fatalf("lock on the new token: %v, %v", got, err)
	}
	if !q.same("token", tl.dev, tl.ino) {
		t.Error("holding a lock on a file that is not the token")
	}
}

func TestOtherUserCannotCancel(t *testing.T) {
	dir := sharedDir(t)
	os.Mkdir(filepath.Join(dir, "gpu"), 0o755)
	unix.Chmod(filepath.Join(dir, "gpu"), 0o1777)
	q := openQ(t, dir, "gpu")
	g := take(t, q, "holder")
	defer g.Release()
	w, _ := q.Enqueue(Ticket{Label: "root's"})
	seq := fmt.Sprint(w.Ticket().Seq)
	for _, claim := range []string{"65534", "0"} { // honest, then lying about being root
		h := startHelper(t, "cancel", dir, "gpu", helperOpts{uid: 65534, env: []string{"QH_SEQ=" + seq, "QH_UID=" + claim}})
		h.expect("notowner")
	}
	if _, err := os.Lstat(filepath.Join(q.path, ticketName(w.Ticket().Seq))); err != nil {
		t.Fatalf("another user removed root's ticket: %v", err)
	}
	// Its own ticket, a user may cancel; root may cancel anyone's.
	e := startHelper(t, "enqueue", dir, "gpu", helperOpts{uid: 65534, label: "nobody's"})
	es := fmt.Sprint(e.seq("ticket"))
	startHelper(t, "cancel", dir, "gpu", helperOpts{uid: 65534, env: []string{"QH_SEQ=" + es, "QH_UID=65534"}}).expect("ok")
	e2 := startHelper(t, "enqueue", dir, "gpu", helperOpts{uid: 65534, label: "nobody's"})
	s2 := e2.seq("ticket")
	if err := q.Cancel(s2, 0); err != nil {
		t.Fatalf("root cancelling uid 65534's ticket: %v", err)
	}
}

func TestDirModes(t *testing.T) {
	base := t.TempDir()
	unix.Chmod(base, 0o2775) // a fleet dir shared through its group
	q := openQ(t, base, "gpu")
	var st unix.Stat_t
	unix.Stat(q.path, &st)
	if st.Mode&0o070 != 0o070 || st.Mode&unix.S_ISVTX == 0 || st.Mode&unix.S_ISGID == 0 {
		t.Errorf("resource dir in a setgid group dir has mode %04o, want group rwx, setgid, sticky", st.Mode&0o7777)
	}
	g := take(t, q, "x")
	var tst unix.Stat_t
	unix.Stat(filepath.Join(q.path, ticketName(g.Ticket().Seq)), &tst)
	if tst.Mode&0o044 != 0o044 {
		t.Errorf("ticket mode %04o: others of the group cannot read it", tst.Mode&0o777)
	}
	g.Release()

	ww := t.TempDir()
	unix.Chmod(ww, 0o777)
	if _, err := OpenDir(ww, "gpu", DirOptions{}); err == nil || !strings.Contains(err.Error(), "sticky") {
		t.Errorf("world-writable non-sticky dir accepted: %v", err)
	}
	priv := t.TempDir()
	q2 := openQ(t, priv, "gpu")
	unix.Stat(q2.path, &st)
	if st.Mode&0o022 != 0 {
		t.Errorf("private resource dir writable by others: %04o", st.Mode&0o7777)
	}
}

// Someone removes the token file while it is held: the next waiter gets a
// fresh token file it could lock, but must not become a second holder
// while the holder's ticket is alive.
func TestTokenRemovedUnderHolderNoSecondHolder(t *testing.T) {
	q := openQ(t, t.TempDir(), "gpu")
	g := take(t, q, "holder")
	os.Remove(filepath.Join(q.path, "token"))
	requireNoSecondHolder(t, q, g)
}

// requireNoSecondHolder queues a waiter while g holds the token: it must
// not get the token until g releases, and must get it then.
func requireNoSecondHolder(t *testing.T, q *testQueue, g Grant) {
	t.Helper()
	w, _ := q.Enqueue(Ticket{Label: "second"})
	res := make(chan error, 1)
	go func() {
		g2, err := w.Wait(ctxT(t, 10*time.Second), nil)
		if err == nil {
			g2.Release()
		}
		res <- err
	}()
	select {
	case err := <-res:
		t.Fatalf("second holder while the first holds: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	g.Release()
	select {
	case err := <-res:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiter stuck after the holder released")
	}
}

// ESCAPES T6: a payload removes its holder's ticket and the token file;
// a waiter must not become a second holder (the holder still holds the
// directory's lock), and gets the token once the holder releases.
func TestTicketAndTokenRemovedUnderHolder(t *testing.T) {
	q := openQ(t, t.TempDir(), "gpu")
	g := take(t, q, "holder")
	os.Remove(filepath.Join(q.path, "token"))
	os.Remove(filepath.Join(q.path, ticketName(g.Ticket().Seq)))
	requireNoSecondHolder(t, q, g)
}

// ESCAPES T1 "a granted time": a ticket that says it was granted, kept
// locked by its forger's live process, is no holder: its process holds
// neither the token nor the directory, so a waiter still takes the token.
func TestForgedGrantedTicketIsNoHolder(t *testing.T) {
	q := openQ(t, t.TempDir(), "gpu")
	// Its forger keeps it locked: a live ticket.
	plantLocked(t, q, Ticket{Seq: 1, Resource: "gpu", UID: os.Geteuid(), Holder: sleeperIdent(t), Label: "forged", Created: time.Now(), Granted: time.Now()}, os.Geteuid())
	if st, _ := q.Status(); st.Holder != nil {
		t.Errorf("queue shows the forged ticket as the holder: %+v", st.Holder)
	}
	w, err := q.Enqueue(Ticket{Label: "waiter"})
	if err != nil {
		t.Fatal(err)
	}
	g, err := w.Wait(ctxT(t, 3*time.Second), nil)
	if err != nil {
		t.Fatalf("a forged granted ticket kept the waiter from a free token: %v", err)
	}
	g.Release()
}

// A FIFO planted at the token is never opened (it would block) and is
// replaced; one planted by another user, which we may not remove, gives an
// error that says what to do.
func TestSpecialFileAtToken(t *testing.T) {
	dir := t.TempDir()
	res := filepath.Join(dir, "gpu")
	os.Mkdir(res, 0o755)
	unix.Mkfifo(filepath.Join(res, "token"), 0o644)
	q := openQ(t, dir, "gpu")
	done := make(chan Grant, 1)
	go func() { done <- take(t, q, "a") }()
	select {
	case g := <-done:
		g.Release()
	case <-time.After(10 * time.Second):
		t.Fatal("blocked on a FIFO planted at the token")
	}
	if len(q.warnings("FIFO")) != 1 {
		t.Errorf("planted FIFO not reported once: %q", q.warns)
	}

	shared := sharedDir(t)
	res = filepath.Join(shared, "gpu")
	os.Mkdir(res, 0o755)
	unix.Chmod(res, 0o1777)
	os.Symlink("/etc/passwd", filepath.Join(res, "token")) // root's, in a sticky dir
	h := startHelper(t, "hold", shared, "gpu", helperOpts{uid: 65534, label: "n"})
	h.expect("ticket")
	f := h.expect("err")
	if msg := strings.Join(f, " "); !strings.Contains(msg, "symlink") || !strings.Contains(msg, "rm ") {
		t.Errorf("error for an unremovable planted symlink: %q", msg)
	}
}
