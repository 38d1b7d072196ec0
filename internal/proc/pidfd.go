// pidfd.go owns signalling: a pidfd is opened for a pid, the pid's start
// time is checked after the open (so the fd cannot name a recycled pid),
// and only then is a signal sent through the fd.
package proc

import (
	"errors"
	"fmt"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

var errESRCH = syscall.ESRCH

// Handle is an open pidfd for a process whose identity was verified.
type Handle struct {
	Ident
	FD int
}

// Open opens a pidfd for id. It returns ErrGone when the pid does not exist,
// has exited (zombie), or now names a different process.
func Open(id Ident) (*Handle, error) {
	h, _, err := open(id, false)
	return h, err
}

// open opens a pidfd for id and checks, through the stat it returns, that
// the pid still names id (and that id is alive, unless zombieOK).
func open(id Ident, zombieOK bool) (*Handle, Stat, error) {
	fd, err := unix.PidfdOpen(id.PID, 0)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil, Stat{}, ErrGone
		}
		return nil, Stat{}, fmt.Errorf("pidfd_open(%d): %w", id.PID, err)
	}
	// The fd now pins this pid; check it still is the process we mean.
	st, err := ReadStat(id.PID)
	if err != nil || st.Start != id.Start || (st.Dead() && !zombieOK) {
		unix.Close(fd)
		return nil, Stat{}, ErrGone
	}
	return &Handle{Ident: id, FD: fd}, st, nil
}

// Signal sends sig through the pidfd. A process that exited meanwhile yields ErrGone.
func (h *Handle) Signal(sig syscall.Signal) error {
	err := unix.PidfdSendSignal(h.FD, sig, nil, 0)
	if errors.Is(err, unix.ESRCH) {
		return ErrGone
	}
	return err
}

// Exited reports, without blocking, whether the process has exited.
func (h *Handle) Exited() bool { return h.WaitExit(0) }

// WaitExit waits up to limit for the process to exit (all its threads: a
// pidfd becomes readable only then) and reports whether it did.
func (h *Handle) WaitExit(limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for {
		fds := []unix.PollFd{{Fd: int32(h.FD), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(max(time.Until(deadline), 0)/time.Millisecond))
		if err != unix.EINTR {
			return err == nil && n > 0
		}
	}
}

// Close releases the pidfd.
func (h *Handle) Close() error { return unix.Close(h.FD) }

// pidfdSignalProcessGroup is PIDFD_SIGNAL_PROCESS_GROUP (Linux 6.9+).
const pidfdSignalProcessGroup = 1 << 2

// Group is a pidfd on a process group's leader, opened while the leader
// held the group's number. Through it the kernel resolves the group's
// members at each signal, for as long as the group has any, even after
// the leader is reaped: the group's pid lives on while a member uses it,
// so it never names another group.
type Group struct {
	leader Ident
	h      *Handle
}

// OpenGroup opens the group that id leads (id alive or a zombie). It
// returns ErrGone when id is reaped, its pid names another process, or it
// leads no group.
func OpenGroup(id Ident) (*Group, error) {
	h, st, err := open(id, true)
	if err != nil {
		return nil, err
	}
	if st.PGID != id.PID {
		h.Close()
		return nil, ErrGone
	}
	return &Group{leader: id, h: h}, nil
}

// Signal sends sig to every member of the group now. It returns ErrGone
// when the group has no member left, and an error wrapping EINVAL on a
// kernel without PIDFD_SIGNAL_PROCESS_GROUP (Linux 6.9+).
func (g *Group) Signal(sig syscall.Signal) error {
	err := unix.PidfdSendSignal(g.h.FD, sig, nil, pidfdSignalProcessGroup)
	if errors.Is(err, unix.ESRCH) {
		return ErrGone
	}
	if err != nil {
		return fmt.Errorf("signalling the process group of pid %d: %w", g.leader.PID, err)
	}
	return nil
}

// Close releases the pidfd.
func (g *Group) Close() error { return g.h.Close() }

// Signal opens a verified pidfd for id, sends sig and closes it.
// It never signals a pid whose start time differs from id.Start.
func Signal(id Ident, sig syscall.Signal) error {
	h, err := Open(id)
	if err != nil {
		return err
	}
	defer h.Close()
	return h.Signal(sig)
}
