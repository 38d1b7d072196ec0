// locker_test.go owns the tests of a process that holds the queue's own
// locks (the token's, the directory's) where no gpu-hold holder explains
// it: Status names it, the waiter it holds up names it (never as a token
// file removed or replaced) and takes the token once it lets go; one on a
// granted ticket of its own is shown as what it is.
package queue

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/testenv"
)

// lockWith starts flock(1) as uid (0: as the test) holding path's flock
// (-o: its command, cat, does not inherit it) and waits until q sees the
// lock taken. The returned func lets go: it closes cat's stdin, cat
// exits, and flock after it.
func lockWith(t *testing.T, q *testQueue, path string, uid int) (proc.Ident, func()) {
	t.Helper()
	if _, err := exec.LookPath("flock"); err != nil {
		testenv.Need(t, "flock(1) (util-linux) is unavailable here, and it is needed to hold a lock as another process")
	}
	c := exec.Command("flock", "-o", path, "cat")
	c.Env = append(os.Environ(), "GPU_HOLD_TEST_MARK="+testMark)
	if uid != 0 {
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
		c.Dir = "/"
	}
	in, err := c.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { c.Wait(); close(done) }()
	release := func() {
		in.Close()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			c.Process.Kill() // our own child, not yet reaped
			t.Error("flock did not exit once its command's stdin closed")
		}
	}
	t.Cleanup(func() {
		in.Close()
		c.Process.Kill()
		<-done
	})
	for deadline := time.Now().Add(20 * time.Second); !lockedNow(t, path); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("flock never took %s", path)
		}
	}
	st, err := proc.ReadStat(c.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	return st.Ident, release
}

// lockedNow reports whether another process holds path's flock.
func lockedNow(t *testing.T, path string) bool {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	locked, err := lockedByOther(int(f.Fd()))
	return locked && err == nil
}

// waitFor waits, bounded, until fn is true.
func waitFor(t *testing.T, what string, fn func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !fn(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never saw %s", what)
		}
	}
}

// lockerQueue is a queue whose files another uid can lock when the test
// runs as root (that uid is returned), else a private one (uid 0: the
// lockers run as the test).
func lockerQueue(t *testing.T) (*testQueue, int) {
	if os.Geteuid() != 0 {
		return openQ(t, t.TempDir(), "gpu"), 0
	}
	q := openQ(t, sharedDir(t), "gpu")
	return q, 65534
}

// ESCAPES T6: a process that locks the token, or the resource directory,
// with no ticket stalls every hold: Status names it (pid, uid, command),
// and so does the waiter it holds up, once, with what can be done; the
// directory's lock is not reported as a token file removed or replaced.
// Once it lets go, the waiter takes the token.
func TestLockerWithNoTicketIsNamed(t *testing.T) {
	for _, lock := range []string{"token", "directory"} {
		t.Run(lock, func(t *testing.T) {
			q, uid := lockerQueue(t)
			tl, err := q.openToken() // the token file exists, as after any hold
			if err != nil {
				t.Fatal(err)
			}
			tl.close()
			path := q.path
			if lock == "token" {
				path = filepath.Join(q.path, tokenName)
			}
			id, release := lockWith(t, q, path, uid)
			wantUID := uid
			if uid == 0 {
				wantUID = os.Geteuid()
			}
			st, err := q.Status()
			if err != nil {
				t.Fatal(err)
			}
			if len(st.Lockers) != 1 || st.Lockers[0].Process != id || st.Lockers[0].Lock != lock || st.Lockers[0].UID != wantUID ||
				len(st.Lockers[0].Cmd) == 0 || st.Lockers[0].Cmd[0] != "flock" || st.Lockers[0].Ticket != 0 || st.Lockers[0].Started.IsZero() {
				t.Fatalf("Status lockers %+v, want flock %v of uid %d holding the %s lock with no ticket", st.Lockers, id, wantUID, lock)
			}
			w, seen, res := startWaiter(t, q)
			requireLockerShown(t, seen, id, lock)
			who := fmt.Sprintf("pid %d", id.PID)
			waitFor(t, "the waiter's warning naming the locker", func() bool { return len(q.warnings(who)) > 0 })
			msg := q.warnings(who)
			for _, s := range []string{"flock -o " + path + " cat", "holds no ticket", "cancel -r gpu " + strconv.FormatUint(w.Ticket().Seq, 10)} {
				if len(msg) != 1 || !strings.Contains(msg[0], s) {
					t.Errorf("the waiter's warnings %q: want one that says %q", msg, s)
				}
			}
			if r := q.warnings("removed or replaced"); len(r) > 0 {
				t.Errorf("a lock taken with no ticket is reported as a token file removed or replaced: %q", r)
			}
			select {
			case err := <-res:
				t.Fatalf("the waiter ended (%v) while the %s lock was held", err, lock)
			default:
			}
			release()
			select {
			case err := <-res:
				if err != nil {
					t.Fatalf("the waiter after the locker let go: %v", err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("the waiter did not take the token once the locker let go")
			}
		})
	}
}

// requireLockerShown waits for progress to show id holding lock.
func requireLockerShown(t *testing.T, seen <-chan *Locker, id proc.Ident, lock string) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case lk := <-seen:
			if lk != nil && lk.Process == id && lk.Lock == lock && !lk.Seen.IsZero() {
				return
			}
		case <-timeout:
			t.Fatalf("the waiter's progress never showed %v holding the %s lock", id, lock)
		}
	}
}

// ESCAPES T6: a granted ticket its user wrote, naming a process of its own
// that holds the token, is the holder; but that process is no gpu-hold,
// and Status and the waiter say so, naming it.
func TestGrantedTicketOfALocker(t *testing.T) {
	q := openQ(t, t.TempDir(), "gpu")
	tl, err := q.openToken()
	if err != nil {
		t.Fatal(err)
	}
	tl.close()
	id, release := lockWith(t, q, filepath.Join(q.path, tokenName), 0)
	plantLocked(t, q, Ticket{Seq: 1, Resource: "gpu", UID: os.Geteuid(), Holder: id, PidNS: ownPidNS(), Label: "mine", Cmd: []string{"python", "train.py"}, Created: time.Now(), Granted: time.Now()}, os.Geteuid())
	st, err := q.Status()
	if err != nil {
		t.Fatal(err)
	}
	if st.Holder == nil || st.Holder.Seq != 1 {
		t.Fatalf("holder %+v, want the granted ticket whose process holds the token", st.Holder)
	}
	if len(st.Lockers) != 1 || st.Lockers[0].Process != id || !st.Lockers[0].Granted || st.Lockers[0].Ticket != 1 || st.Lockers[0].Comm != "flock" {
		t.Fatalf("lockers %+v, want flock %v on granted ticket 1", st.Lockers, id)
	}
	if why := st.Lockers[0].Why(); !strings.Contains(why, "not a gpu-hold") {
		t.Errorf("Why() = %q", why)
	}
	_, seen, res := startWaiter(t, q)
	requireLockerShown(t, seen, id, "token")
	who := fmt.Sprintf("pid %d", id.PID)
	waitFor(t, "the waiter's warning naming the holder's process", func() bool { return len(q.warnings(who)) > 0 })
	if msg := q.warnings(who); !strings.Contains(msg[0], "granted ticket 1") || !strings.Contains(msg[0], "not a gpu-hold") {
		t.Errorf("the waiter's warning %q", msg)
	}
	release()
	select {
	case err := <-res:
		if err != nil {
			t.Fatalf("the waiter after the locker let go: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the waiter did not take the token once the locker let go")
	}
}

// startWaiter queues a waiter and waits for the token in the background,
// releasing it once granted: seen gets each locker its status shows, res
// its wait's end.
func startWaiter(t *testing.T, q *testQueue) (w Waiter, seen chan *Locker, res chan error) {
	t.Helper()
	w, err := q.Enqueue(Ticket{Label: "waiter"})
	if err != nil {
		t.Fatal(err)
	}
	seen, res = make(chan *Locker, 64), make(chan error, 1)
	go func() {
		g, err := w.Wait(ctxT(t, 60*time.Second), func(p Position) { seen <- p.Locker })
		if err == nil {
			g.Release()
		}
		res <- err
	}()
	return w, seen, res
}
