// watch.go owns event-driven waiting on a set of processes: each watched
// process has a pidfd in one epoll set, and a pidfd becomes readable when its
// process exits (even one that is not our child). Teardown waits here instead
// of sleeping.
package teardown

import (
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/proc"
)

// watcher holds verified pidfds of live processes in an epoll set.
type watcher struct {
	mu      sync.Mutex
	epfd    int
	handles map[proc.Ident]*proc.Handle
	byFD    map[int32]proc.Ident
	limit   int                 // most pidfds to hold at once; beyond it, callers rescan on a timer
	efd     int                 // eventfd that a tracker's Changed channel and a cut grace write to (0: none)
	gone    map[proc.Ident]bool // watched processes seen to exit
	changed bool                // the tracker reported a change since takeChanged
}

func newWatcher() (*watcher, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	limit := 4096
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) == nil && rl.Cur > 1024 {
		limit = int(rl.Cur) - 512
	}
	return &watcher{epfd: epfd, handles: map[proc.Ident]*proc.Handle{}, byFD: map[int32]proc.Ident{}, gone: map[proc.Ident]bool{}, limit: limit}, nil
}

// full reports whether the watcher holds as many pidfds as it may.
func (w *watcher) full() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.handles) >= w.limit
}

// add watches id; a process that is gone already is not added. It returns
// the handle (also used to signal it), or nil when id is gone.
func (w *watcher) add(id proc.Ident) *proc.Handle {
	w.mu.Lock()
	if h, ok := w.handles[id]; ok {
		w.mu.Unlock()
		return h
	}
	full := len(w.handles) >= w.limit
	w.mu.Unlock()
	h, err := proc.Open(id)
	if err != nil {
		return nil
	}
	if full {
		return h // the caller closes it after use: not watched
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(h.FD)}
	if err := unix.EpollCtl(w.epfd, unix.EPOLL_CTL_ADD, h.FD, &ev); err != nil {
		return h
	}
	w.mu.Lock()
	w.handles[id] = h
	w.byFD[int32(h.FD)] = id
	w.mu.Unlock()
	return h
}

// watched reports whether h is held by the watcher (else the caller closes it).
func (w *watcher) watched(h *proc.Handle) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.handles[h.Ident] == h
}

// signal sends sig to id through a verified pidfd, with authority as (nil:
// this process's own); proc.ErrGone when id is gone.
func (w *watcher) signal(id proc.Ident, sig syscall.Signal, as *proc.Authority) error {
	h := w.add(id)
	if h == nil {
		return proc.ErrGone
	}
	err := as.Signal(h, sig)
	if !w.watched(h) {
		h.Close()
	}
	return err
}

// follow makes changed (a tracker's birth/exit notices) wake wait too,
// through an eventfd in the same epoll set. It returns when stop closes.
func (w *watcher) follow(changed <-chan struct{}, stop <-chan struct{}) error {
	if changed == nil {
		return nil
	}
	efd, err := w.eventfd()
	if err != nil {
		return err
	}
	go func() {
		one := []byte{1, 0, 0, 0, 0, 0, 0, 0}
		for {
			select {
			case <-stop:
				return
			case <-changed:
				unix.Write(efd, one)
			}
		}
	}()
	return nil
}

// wakeOn makes wait return when cut closes (a cut grace), through the same
// eventfd as follow. It returns when cut or stop closes.
func (w *watcher) wakeOn(cut <-chan struct{}, stop <-chan struct{}) error {
	if cut == nil {
		return nil
	}
	efd, err := w.eventfd()
	if err != nil {
		return err
	}
	go func() {
		select {
		case <-stop:
		case <-cut:
			unix.Write(efd, []byte{1, 0, 0, 0, 0, 0, 0, 0})
		}
	}()
	return nil
}

// eventfd is the watcher's eventfd in its epoll set, made on first use.
func (w *watcher) eventfd() (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.efd > 0 {
		return w.efd, nil
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return 0, err
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(efd)}
	if err := unix.EpollCtl(w.epfd, unix.EPOLL_CTL_ADD, efd, &ev); err != nil {
		unix.Close(efd)
		return 0, err
	}
	w.efd = efd
	return efd, nil
}

// wait blocks until a watched process exits, the tracker reports a change,
// or timeout passes (timeout < 0: no timeout). Exited processes are dropped.
func (w *watcher) wait(timeout time.Duration) {
	ms := -1
	if timeout >= 0 {
		ms = int((timeout + time.Millisecond - 1) / time.Millisecond)
	}
	w.epollOnce(ms)
}

// epollOnce waits up to ms for exits and drops the exited; true if any.
func (w *watcher) epollOnce(ms int) bool {
	evs := make([]unix.EpollEvent, 256)
	n, err := unix.EpollWait(w.epfd, evs, ms)
	if err != nil || n <= 0 {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ev := range evs[:n] {
		if w.efd > 0 && ev.Fd == int32(w.efd) {
			var buf [8]byte
			unix.Read(w.efd, buf[:])
			w.changed = true
			continue
		}
		id, ok := w.byFD[ev.Fd]
		if !ok {
			continue
		}
		h := w.handles[id]
		unix.EpollCtl(w.epfd, unix.EPOLL_CTL_DEL, h.FD, nil)
		h.Close()
		delete(w.handles, id)
		delete(w.byFD, ev.Fd)
		w.gone[id] = true
	}
	return true
}

// stillAlive returns the members of live that have not exited, as far as
// the watcher's pidfds tell (a member it does not watch counts as alive).
func (w *watcher) stillAlive(live map[proc.Ident]proc.Stat) map[proc.Ident]proc.Stat {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[proc.Ident]proc.Stat, len(live))
	for id, st := range live {
		if _, ok := w.handles[id]; ok || !w.gone[id] {
			out[id] = st
		}
	}
	return out
}

// takeChanged reports (and forgets) whether the tracker reported a birth or
// an exit since the last call.
func (w *watcher) takeChanged() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.changed
	w.changed = false
	return c
}

// close releases every pidfd and the epoll set.
func (w *watcher) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, h := range w.handles {
		h.Close()
	}
	w.handles = nil
	w.byFD = nil
	unix.Close(w.epfd)
	if w.efd > 0 {
		unix.Close(w.efd)
	}
}
