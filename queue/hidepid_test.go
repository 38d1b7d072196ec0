// hidepid_test.go owns the test of a waiter whose /proc hides the tickets'
// holders (hidepid): another user's holder and waiter ahead of it that
// pidfd_open finds are alive, not dead, and FIFO holds.
package queue

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/testenv"
)

const (
	hidepidStage = "QH_HIDEPID" // set once the helper runs in its own mount namespace
	hidepidUID   = 65534
)

// hidepidHelper is a waiter of uid 65534 whose /proc hides every other
// user's processes. It starts as root: it mounts that /proc, then drops to
// the uid, then checks that its parent (the test, root) is hidden from it.
// It says "nohidepid ERR" when /proc cannot be mounted so, "visible PID"
// when the parent still shows, then "queued N", "granted N".
func hidepidHelper(say func(string, ...any)) int {
	if os.Getenv(hidepidStage) == "" {
		return hideProc(say)
	}
	if err := dropTo(hidepidUID); err != nil {
		say("err dropping to uid %d: %v", hidepidUID, err)
		return 1
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(os.Getppid())); err == nil {
		say("visible %d", os.Getppid())
		return 1
	}
	return hiddenWaiter(say)
}

// hideProc mounts a /proc with hidepid=invisible in a mount namespace of
// its own and re-executes the helper there. A new mount namespace is only
// the unsharing thread's: the exec carries it to the whole process.
// hidepid=invisible (Linux 5.8) comes with proc mounts of their own
// options: hidepid=2 on an older kernel would hide the host's /proc too.
func hideProc(say func(string, ...any)) int {
	runtime.LockOSThread()
	err := unix.Unshare(unix.CLONE_NEWNS)
	if err == nil { // private first: the new /proc must not reach the host
		err = unix.Mount("none", "/", "", unix.MS_REC|unix.MS_PRIVATE, "")
	}
	if err == nil {
		err = unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "hidepid=invisible")
	}
	if err != nil {
		say("nohidepid %v", err)
		return 0
	}
	err = syscall.Exec("/proc/self/exe", os.Args, append(os.Environ(), hidepidStage+"=1"))
	say("err re-executing in the new mount namespace: %v", err)
	return 1
}

// dropTo makes every thread uid and gid uid, with no supplementary group.
func dropTo(uid int) error {
	if err := syscall.Setgroups(nil); err != nil {
		return err
	}
	if err := syscall.Setresgid(uid, uid, uid); err != nil {
		return err
	}
	return syscall.Setresuid(uid, uid, uid)
}

// hiddenWaiter enqueues as the uid it now is and waits for the token.
func hiddenWaiter(say func(string, ...any)) int {
	q, err := OpenDir(os.Getenv("QH_DIR"), os.Getenv("QH_RES"), DirOptions{Warn: func(m string) { fmt.Fprintln(os.Stderr, "warn:", m) }})
	if err != nil {
		say("err %v", err)
		return 1
	}
	w, err := q.Enqueue(Ticket{Label: "hidden"})
	if err != nil {
		say("err %v", err)
		return 1
	}
	say("queued %d", w.Ticket().Seq)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g, err := w.Wait(ctx, nil)
	if err != nil {
		say("err %v", err)
		return 1
	}
	say("granted %d", g.Ticket().Seq)
	<-make(chan struct{}) // the test kills it
	return 0
}

// A waiter whose /proc hides root's processes (hidepid) must take root's
// holder and waiter ahead of it for alive, as pidfd_open finds them: taken
// for dead, the holder would be handed to it as dead and the waiter
// skipped, and it would take the token before them.
func TestHidepidWaiterKeepsFIFO(t *testing.T) {
	dir := sharedDir(t)
	q := openQ(t, dir, "gpu")
	hg := take(t, q, "H")
	t.Cleanup(func() { hg.Release() }) // idempotent: for a test that fails holding it
	w1, err := q.Enqueue(Ticket{Label: "W1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w1.Cancel() })
	h := startHelper(t, "hidepid", dir, "gpu", helperOpts{label: "W2"})
	w2 := hiddenQueued(t, h, w1.Ticket().Seq)
	if err := hg.Release(); err != nil {
		t.Fatalf("releasing H: %v", err)
	}
	// W1 does not wait yet: it is ahead all the same, as long as it lives.
	select {
	case l, ok := <-h.lines:
		t.Fatalf("after H's release, with root's live waiter W1 (ticket %d) ahead of its W2 (ticket %d), the hidepid helper said %q (exited: %v); want no grant until W1 has had the token", w1.Ticket().Seq, w2, l, !ok)
	case <-time.After(time.Second):
	}
	g1, err := w1.Wait(ctxT(t, 5*time.Second), nil)
	if err != nil {
		t.Fatalf("W1, first in line once H released, was not granted: %v", err)
	}
	t.Cleanup(func() { g1.Release() })
	if err := g1.Release(); err != nil {
		t.Fatalf("releasing W1: %v", err)
	}
	select {
	case l := <-h.lines:
		if l != fmt.Sprintf("granted %d", w2) {
			t.Fatalf("after W1's release the hidepid helper said %q; want \"granted %d\"", l, w2)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("the hidepid helper's W2 (ticket %d) was not granted within 5s of W1's release, the queue empty ahead of it", w2)
	}
	h.kill()
}

// hiddenQueued reads what the hidepid helper says up to its "queued N",
// skipping (or failing) the test when /proc could not be made to hide
// root's processes from it, and returns N, which must come after ahead.
func hiddenQueued(t *testing.T, h *helper, ahead uint64) uint64 {
	t.Helper()
	select {
	case l := <-h.lines:
		var n uint64
		if _, err := fmt.Sscanf(l, "queued %d", &n); err == nil {
			if n <= ahead {
				t.Fatalf("the hidepid helper's ticket is %d; want one after W1's %d", n, ahead)
			}
			return n
		}
		if why, ok := strings.CutPrefix(l, "nohidepid "); ok {
			testenv.Need(t, "a /proc with hidepid=invisible cannot be mounted: %s", why)
		}
		t.Fatalf("test shape: the hidepid helper said %q; want \"queued N\" once its /proc hides root's processes (\"visible PID\": the test's pid still shows)", l)
	case <-time.After(20 * time.Second):
		t.Fatal("the hidepid helper did not say \"queued N\" within 20s")
	}
	return 0
}
