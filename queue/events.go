// events.go owns what a waiter sleeps on, all in one poll(2): inotify on
// the resource dir (tickets appearing, vanishing, renamed; overflow) and on
// the token file (closed: a holder released) for the waiter first in line,
// inotify on just two tickets (its own and the one ahead) for a waiter
// further back, the pidfds of the holder and of the tickets ahead (their
// exit, even by SIGKILL), and an eventfd kicked when the caller's context
// ends. There is no poll quantum, and a hand-off wakes only the waiters it
// can move, not the whole queue.
package queue

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/proc"
)

type events struct {
	in     int // inotify; -1: unavailable (degraded)
	kick   int // eventfd
	mu     sync.Mutex
	closed bool // kick is closed: a late kickNow must not write to a reused fd
	noTok  bool // the token file is not watched (degraded)
	noDir  bool // the directory is not watched (degraded)
	tokWD  int  // -1: the token is not watched
	tokIno uint64
	dirWD  int                     // -1: the directory is not watched
	files  map[int32]watchedTicket // per-ticket watches, by wd
	pids   map[proc.Ident]*proc.Handle
	buf    []byte
	names  map[string]bool // when set, only these entries' events in the directory wake wait
	wakes  *atomic.Int64   // counts poll returns (the queue handle's)
}

// watchedTicket is one ticket file watched on its own.
type watchedTicket struct {
	name     string
	dev, ino uint64
}

// ticketEvents wake a waiter for one ticket file: unlinked or replaced by a
// rename (its link count changes), or freed.
const ticketEvents = unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF

// watchAll makes wait wake for every entry of the directory and for the
// token: for the waiter first in line, or one that shows its place. It
// reports whether a watch was added (events before it were not seen: the
// caller looks again before it sleeps).
func (e *events) watchAll(q *dirQueue, tl *tokenLock) (added bool) {
	e.names = nil
	if e.in < 0 {
		return false
	}
	e.unwatchTickets()
	added = e.watchDir(q)
	if e.tokWD < 0 || e.tokIno != tl.ino {
		e.watchToken(q, tl)
		added = added || e.tokWD >= 0
	}
	return added
}

// watchDir watches the directory our fd names (not whatever its path names
// now) for entries appearing, vanishing and being renamed.
func (e *events) watchDir(q *dirQueue) (added bool) {
	if e.dirWD >= 0 {
		return false
	}
	wd, err := unix.InotifyAddWatch(e.in, fdPath(q.fd), dirEvents)
	if err != nil {
		q.warnf("inotify-dir", "cannot watch %s with inotify (%v): waiting re-checks the queue every %v instead of at once; raise fs.inotify.max_user_watches", q.path, err, degradedRecheck)
		e.noDir = true
		return false
	}
	e.dirWD, e.noDir = wd, false
	return true
}

// watchTickets makes wait wake only for the given tickets (a waiter's own
// and the one directly ahead of it), each watched on its own file so that
// nothing else in the queue wakes it. A ticket that is not the file the
// caller scanned (gone or replaced since) reports added, so the caller
// looks again. Where a ticket cannot be watched on its own (out of
// watches), the directory is watched with a filter on these names instead.
func (e *events) watchTickets(q *dirQueue, ts ...watchedTicket) (added bool) {
	if e.in < 0 {
		return false
	}
	want := map[watchedTicket]bool{}
	for _, t := range ts {
		want[t] = true
	}
	for wd, t := range e.files {
		if !want[t] {
			unix.InotifyRmWatch(e.in, uint32(wd))
			delete(e.files, wd)
		}
	}
	have := map[watchedTicket]bool{}
	for _, t := range e.files {
		have[t] = true
	}
	fallback, filesAdded := false, false
	for _, t := range ts {
		if have[t] {
			continue
		}
		fd, st, err := q.openRegular(t.name, unix.O_RDONLY)
		switch {
		case errors.Is(err, unix.ENOENT), errors.Is(err, errChanged):
			added = true // gone or replaced since the scan: look again
			continue
		case err != nil:
			fallback = true
			continue
		case st.Dev != t.dev || st.Ino != t.ino:
			unix.Close(fd)
			added = true
			continue
		}
		// Through our fd's magic link: the very file opened and checked.
		wd, err := watchTicket(e.in, fdPath(fd), ticketEvents)
		unix.Close(fd)
		if err != nil {
			fallback = true
			continue
		}
		e.files[int32(wd)], filesAdded = t, true
		have[t] = true
	}
	if e.tokWD >= 0 {
		unix.InotifyRmWatch(e.in, uint32(e.tokWD))
		e.tokWD = -1
	}
	if fallback {
		// The directory stays watched, filtered by name (the ticket
		// watches just added go again: they do not count as added).
		e.unwatchTickets()
		if e.watchDir(q) {
			added = true
		}
		e.names = map[string]bool{}
		for _, t := range ts {
			e.names[t.name] = true
		}
		return added
	}
	e.names = nil
	if e.dirWD >= 0 {
		unix.InotifyRmWatch(e.in, uint32(e.dirWD))
		e.dirWD = -1
	}
	return added || filesAdded
}

// unwatchTickets removes the per-ticket watches.
func (e *events) unwatchTickets() {
	for wd := range e.files {
		unix.InotifyRmWatch(e.in, uint32(wd))
		delete(e.files, wd)
	}
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
	e := &events{in: -1, kick: kick, tokWD: -1, dirWD: -1, wakes: &q.wakes, files: map[int32]watchedTicket{}, pids: map[proc.Ident]*proc.Handle{}, buf: make([]byte, 64<<10)}
	in, err := inotifyInit(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err == nil {
		// Watch the very directory our fd names, not whatever the path names now.
		if e.dirWD, err = unix.InotifyAddWatch(in, fdPath(q.fd), dirEvents); err != nil {
			e.dirWD = -1
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

// watchTicket adds a ticket's watch; tests replace it to run out of watches.
var watchTicket = unix.InotifyAddWatch

// degradedRecheck bounds the re-check period when inotify is unavailable.
const degradedRecheck = 200 * time.Millisecond

func (e *events) degraded() bool { return e.in < 0 || e.noTok || e.noDir }

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
	var deadline time.Time
	if timeout >= 0 {
		deadline = time.Now().Add(timeout)
	}
	for {
		fds := []unix.PollFd{{Fd: int32(e.in), Events: unix.POLLIN}, {Fd: int32(e.kick), Events: unix.POLLIN}}
		for _, h := range e.pids {
			if !h.Exited() {
				fds = append(fds, unix.PollFd{Fd: int32(h.FD), Events: unix.POLLIN})
			}
		}
		ms := -1
		if timeout >= 0 {
			ms = int(min((max(time.Until(deadline), 0)+time.Millisecond-1)/time.Millisecond, math.MaxInt32))
		}
		n, err := unix.Poll(fds, ms)
		e.wakes.Add(1)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("poll: %v", err)
		}
		// Every wake-up that matters rescans, so the events need no more
		// decoding than whether they matter: draining is enough.
		relevant := n <= 0 || fds[1].Revents != 0
		for _, fd := range fds[2:] {
			relevant = relevant || fd.Revents != 0
		}
		for e.in >= 0 {
			m, err := unix.Read(e.in, e.buf)
			if err != nil || m <= 0 {
				break
			}
			relevant = relevant || e.matters(e.buf[:m])
		}
		var b [8]byte
		unix.Read(e.kick, b[:])
		if relevant {
			return nil
		}
	}
}

// matters reports whether a batch of inotify events holds one that can
// move this waiter: an overflow, the directory itself going, any event of a
// ticket watched on its own or of the token, or an entry of the directory
// when no filter is set or the filter names it. The IN_IGNORED of a watch
// this waiter removed itself does not matter.
func (e *events) matters(buf []byte) bool {
	for len(buf) >= unix.SizeofInotifyEvent {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[0]))
		end := unix.SizeofInotifyEvent + int(ev.Len)
		if end > len(buf) {
			return true
		}
		_, file := e.files[ev.Wd]
		switch {
		case ev.Mask&unix.IN_Q_OVERFLOW != 0, file:
			return true
		case int(ev.Wd) == e.tokWD && e.tokWD >= 0:
			return true
		case int(ev.Wd) == e.dirWD && e.dirWD >= 0:
			if ev.Mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF|unix.IN_IGNORED|unix.IN_UNMOUNT) != 0 || e.names == nil {
				return true
			}
			if ev.Len > 0 && e.names[string(bytes.TrimRight(buf[unix.SizeofInotifyEvent:end], "\x00"))] {
				return true
			}
		}
		buf = buf[end:]
	}
	return false
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
