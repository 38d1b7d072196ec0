// events.go owns what a waiter sleeps on, all in one poll(2): inotify on
// the resource dir (tickets appearing, vanishing, renamed; overflow), inotify
// on the token file (closed: a holder released), the pidfds of the holder
// and of the tickets ahead (their exit, even by SIGKILL), and an eventfd
// kicked when the caller's context ends. There is no poll quantum.
package queue

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/proc"
)

type events struct {
	in     int // inotify; -1: unavailable (degraded)
	kick   int // eventfd
	mu     sync.Mutex
	closed bool // kick is closed: a late kickNow must not write to a reused fd
	noTok  bool // the token file is not watched (degraded)
	tokWD  int
	tokIno uint64
	pids   map[proc.Ident]*proc.Handle
	buf    []byte
}

const dirEvents = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR

const tokenEvents = unix.IN_CLOSE_WRITE | unix.IN_CLOSE_NOWRITE | unix.IN_ATTRIB |
	unix.IN_DELETE_SELF | unix.IN_MOVE_SELF

// newEvents sets up the wake-ups. When inotify is out of instances or
// watches (a user with more than fs.inotify.max_user_instances waiting
// holds), it says so once and the waiter falls back to pidfds plus a short
// re-check (degraded), rather than failing.
func newEvents(q *dirQueue) (*events, error) {
	kick, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("eventfd: %v (too many open files? raise ulimit -n)", err)
	}
	e := &events{in: -1, kick: kick, tokWD: -1, pids: map[proc.Ident]*proc.Handle{}, buf: make([]byte, 64<<10)}
	in, err := inotifyInit(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err == nil {
		// Watch the very directory our fd names, not whatever the path names now.
		if _, err = unix.InotifyAddWatch(in, fdPath(q.fd), dirEvents); err != nil {
			unix.Close(in)
		}
	}
	if err != nil {
		q.warnf("inotify", "cannot watch %s with inotify (%v): waiting re-checks the queue every %v instead of at once; raise fs.inotify.max_user_instances / max_user_watches", q.path, err, degradedRecheck)
		return e, nil
	}
	e.in = in
	return e, nil
}

// inotifyInit is inotify_init1; tests replace it to run out of instances.
var inotifyInit = unix.InotifyInit1

// degradedRecheck bounds the re-check period when inotify is unavailable.
const degradedRecheck = 200 * time.Millisecond

func (e *events) degraded() bool { return e.in < 0 || e.noTok }

func fdPath(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// watchToken watches the token file tl has open (again, after a reopen).
func (e *events) watchToken(q *dirQueue, tl *tokenLock) {
	if e.in < 0 || tl.ino == e.tokIno && e.tokWD >= 0 {
		return
	}
	if e.tokWD >= 0 {
		unix.InotifyRmWatch(e.in, uint32(e.tokWD))
	}
	wd, err := unix.InotifyAddWatch(e.in, fdPath(tl.fd), tokenEvents)
	if err != nil {
		q.warnf("inotify-token", "cannot watch %s/%s with inotify (%v): waiting re-checks the token every %v instead of at once; raise fs.inotify.max_user_watches", q.path, tokenName, err, degradedRecheck)
		e.noTok = true
		return
	}
	e.tokWD, e.tokIno, e.noTok = wd, tl.ino, false
}

// watchPids makes the pidfd set ids. It reports whether some of them could
// not be watched (gone, or already exited while its ticket still looks
// alive): the caller then re-checks on a backoff.
func (e *events) watchPids(ids []proc.Ident) (unsure bool) {
	want := map[proc.Ident]bool{}
	for _, id := range ids {
		want[id] = true
	}
	for id, h := range e.pids {
		if !want[id] {
			h.Close()
			delete(e.pids, id)
		}
	}
	for id := range want {
		h, ok := e.pids[id]
		if !ok {
			var err error
			if h, err = proc.Open(id); err != nil {
				unsure = true
				continue
			}
			e.pids[id] = h
		}
		if h.Exited() {
			unsure = true // its exit is known; a readable fd would only spin
		}
	}
	return unsure
}

// kickNow wakes wait (from another goroutine).
func (e *events) kickNow() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.closed {
		var one = [8]byte{1}
		unix.Write(e.kick, one[:])
	}
}

// wait sleeps until something happens or timeout (<0: none) passes, then
// drains what woke it.
func (e *events) wait(timeout time.Duration) error {
	fds := []unix.PollFd{{Fd: int32(e.in), Events: unix.POLLIN}, {Fd: int32(e.kick), Events: unix.POLLIN}}
	for _, h := range e.pids {
		if !h.Exited() {
			fds = append(fds, unix.PollFd{Fd: int32(h.FD), Events: unix.POLLIN})
		}
	}
	ms := -1
	if timeout >= 0 {
		ms = int(min((timeout+time.Millisecond-1)/time.Millisecond, math.MaxInt32))
	}
	if _, err := unix.Poll(fds, ms); err != nil && !errors.Is(err, unix.EINTR) {
		return fmt.Errorf("poll: %v", err)
	}
	// Every wake-up rescans, so the events themselves (IN_Q_OVERFLOW
	// included) need no decoding: draining is enough.
	for e.in >= 0 {
		if _, err := unix.Read(e.in, e.buf); err != nil {
			break
		}
	}
	var b [8]byte
	unix.Read(e.kick, b[:])
	return nil
}

func (e *events) close() {
	for _, h := range e.pids {
		h.Close()
	}
	if e.in >= 0 {
		unix.Close(e.in)
	}
	e.mu.Lock()
	e.closed = true
	unix.Close(e.kick)
	e.mu.Unlock()
}
