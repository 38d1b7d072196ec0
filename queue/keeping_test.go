// keeping_test.go owns the tests of a holder's keeping note: a holder
// (another uid) that keeps its token after its payload says why, Status
// and the waiters show it, with its text escaped; a note another user
// writes about that ticket is not believed; a released or dead holder's
// note does not outlive its ticket.
package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/proc"
)

// keptFor is the note keepHelper publishes: its text has escapes in it,
// as another user's node path and command line may.
var keptFor = Keeping{Holders: []KeptNode{{Node: "/dev/fake\x1b[31m0", PID: 4242, UID: 1000, User: "bob", Command: "python\x1b]0;owned\x07 train.py"}}}

// keepHelper takes the token, notes keptFor ("noted SEQ"), and on a line
// on stdin removes the note ("unnoted"); it releases when stdin closes.
func keepHelper(say func(string, ...any), q Queue, label string) int {
	w, err := q.Enqueue(Ticket{Label: label})
	if err != nil {
		say("err %v", err)
		return 1
	}
	g, err := w.Wait(context.Background(), nil)
	if err != nil {
		say("err %v", err)
		return 1
	}
	k := keptFor
	k.Since = time.Now()
	if err := g.(KeepingNoter).NoteKeeping(&k); err != nil {
		say("err %v", err)
		return 1
	}
	say("noted %d", g.Ticket().Seq)
	var b [1]byte
	if n, _ := os.Stdin.Read(b[:]); n == 1 {
		g.(KeepingNoter).NoteKeeping(nil)
		say("unnoted %d", g.Ticket().Seq)
	}
	io.Copy(io.Discard, os.Stdin)
	g.Release()
	return 0
}

// A holder of another uid notes why it keeps the token: Status and a
// waiter's progress show it, a waiter whose allowance runs out names it,
// and nothing of its text reaches a terminal unescaped. Once it removes
// the note, and once it releases, nothing is shown and no file is left.
func TestKeepingShownToWaiters(t *testing.T) {
	dir := sharedDir(t)
	q := openQ(t, dir, "gpu")
	h := startHelper(t, "keep", dir, "gpu", helperOpts{uid: 65534, label: "keeper"})
	seq := h.seq("noted")
	st, err := q.Status()
	if err != nil {
		t.Fatal(err)
	}
	k := st.Holder.Keeping
	if k == nil || len(k.Holders) != 1 || k.Holders[0].PID != 4242 || k.Holders[0].Node != keptFor.Holders[0].Node || k.Since.IsZero() {
		t.Fatalf("Status holder keeping %+v, want the holder's note %+v", k, keptFor)
	}
	line := k.Line()
	if strings.ContainsAny(line, "\x1b\x07") || !strings.Contains(line, "pid 4242 (bob: python") || !strings.HasPrefix(line, "the holder keeps the token while /dev/fake") {
		t.Errorf("keeping line %q: want the node, pid, user and command, with no control characters", line)
	}
	w, err := q.Enqueue(Ticket{Label: "waiter"})
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan *Keeping, 64)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = w.Wait(ctx, func(p Position) {
		if p.Holder != nil {
			seen <- p.Holder.Keeping
		}
	})
	var wt *WaitTimeout
	if !errors.As(err, &wt) || !strings.Contains(err.Error(), "the holder keeps the token while /dev/fake") {
		t.Errorf("the waiter's timeout: %v, want one that says why the holder keeps the token", err)
	}
	if got := <-seen; got == nil || got.Holders[0].PID != 4242 {
		t.Errorf("the waiter was shown keeping %+v, want the holder's note", got)
	}
	h.in.Write([]byte("x"))
	h.seq("unnoted")
	if st, _ := q.Status(); st.Holder == nil || st.Holder.Keeping != nil {
		t.Errorf("Status after the note was removed: holder %+v, want the holder with no keeping", st.Holder)
	}
	h.finish()
	if _, err := os.Lstat(filepath.Join(q.path, keepName(seq))); err == nil {
		t.Error("the note outlived the release")
	}
}

// writeAs writes data to path as uid (a sticky dir lets it create there).
func writeAs(t *testing.T, uid int, path string, data []byte) {
	t.Helper()
	c := exec.Command("sh", "-c", `cat > "$1"`, "sh", path)
	c.Stdin = strings.NewReader(string(data))
	c.Dir = "/"
	c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("writing %s as uid %d: %v\n%s", path, uid, err, out)
	}
}

// A note about uid 65534's holder written by another uid is not believed
// (and is reported); neither is one of its own that names another holder.
// A holder SIGKILLed while it keeps the token leaves its note, which is
// removed once its ticket is gone.
func TestKeepingOnlyFromTheTicketsOwner(t *testing.T) {
	dir := sharedDir(t)
	q := openQ(t, dir, "gpu")
	h := startHelper(t, "hold", dir, "gpu", helperOpts{uid: 65534, label: "holder"})
	seq := h.seq("ticket")
	h.seq("granted")
	st, err := q.Status()
	if err != nil || st.Holder == nil {
		t.Fatalf("Status: %+v, %v", st, err)
	}
	note, _ := json.Marshal(keepNote{Seq: seq, Holder: st.Holder.Holder, Keeping: Keeping{Since: time.Now(), Holders: []KeptNode{{Node: "/dev/forged", PID: 1}}}})
	path := filepath.Join(q.path, keepName(seq))
	writeAs(t, 65533, path, note)
	if st, _ := q.Status(); st.Holder == nil || st.Holder.Keeping != nil {
		t.Fatalf("a note uid 65533 wrote about uid 65534's holder was believed: %+v", st.Holder.Keeping)
	}
	if len(q.warnings("only its owner")) == 0 {
		t.Errorf("the forged note was not reported: %v", q.warns)
	}
	h.kill()
	os.Remove(path)
	other, _ := json.Marshal(keepNote{Seq: seq, Holder: proc.Ident{PID: 1, Start: 1}, Keeping: Keeping{Holders: []KeptNode{{Node: "/dev/other"}}}})
	writeAs(t, 65534, path, other)
	g := take(t, q, "successor")
	if d := g.Dead(); len(d) != 1 || d[0].Seq != seq || d[0].Keeping != nil {
		t.Fatalf("the successor was handed %+v, want dead holder %d", d, seq)
	}
	for _, d := range g.Dead() {
		if err := g.Reaped(d); err != nil {
			t.Fatal(err)
		}
	}
	g.Release()
	take(t, q, "next").Release()
	if _, err := os.Lstat(path); err == nil {
		t.Errorf("the dead holder's note outlived its ticket")
	}
	if sk := fmt.Sprint(st.Skipped); strings.Contains(sk, keepPrefix) {
		t.Errorf("a note was skipped as garbage: %s", sk)
	}
}
