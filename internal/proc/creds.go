// creds.go owns reading a process's effective uid from the kernel's
// credentials: what a non-dumpable process's /proc owner (root) hides.
package proc

import (
	"errors"
	"strconv"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrHidden says a process runs (its pidfd is open and it has not exited)
// but this reader's /proc does not show it (hidepid).
var ErrHidden = errors.New("the process runs, but this reader's /proc hides it")

// EUIDOf returns id's effective uid, read through a pidfd opened before
// id's start time is checked, so that the uid is id's and not a recycled
// pid's. ErrGone: id no longer runs; ErrHidden: it runs, but its /proc
// cannot be read. The kernel answers through the pidfd (PIDFD_GET_INFO,
// Linux 6.13), sparing the formatting of a whole status, which a queue
// scan would pay for every live ticket; before 6.13 the status says.
func EUIDOf(id Ident) (int, error) {
	h, err := openRunning(id)
	if err != nil {
		return -1, err
	}
	defer h.Close()
	if uid, ok := pidfdEUID(h.FD); ok {
		return uid, nil
	}
	f := statusUIDs(id.PID)
	if len(f) < 2 {
		return -1, h.hiddenOrGone()
	}
	uid, err := strconv.Atoi(f[1])
	if err != nil {
		return -1, h.hiddenOrGone()
	}
	return uid, nil
}

// openRunning opens a pidfd for id, a live (not zombie) process; a /proc
// that hides it gives ErrHidden, as long as the pidfd says it runs.
func openRunning(id Ident) (*Handle, error) {
	fd, err := unix.PidfdOpen(id.PID, 0)
	if err != nil {
		return nil, ErrGone // gone (ESRCH), or no way to tell: not believed alive
	}
	h := &Handle{Ident: id, FD: fd}
	st, err := ReadStat(id.PID)
	switch {
	case err != nil:
		err = h.hiddenOrGone()
	case st.Start != id.Start || st.Dead():
		err = ErrGone
	}
	if err != nil {
		h.Close()
		return nil, err
	}
	return h, nil
}

// hiddenOrGone is why h's /proc could not be read: it exited, or it is hidden.
func (h *Handle) hiddenOrGone() error {
	if h.Exited() {
		return ErrGone
	}
	return ErrHidden
}

// noPidfdInfo is set once the kernel is known not to answer PIDFD_GET_INFO.
var noPidfdInfo atomic.Bool

// pidfdEUID asks the kernel for the credentials of pidfd's process; ok is
// false when it cannot say (it exited, or no such ioctl).
func pidfdEUID(pidfd int) (uid int, ok bool) {
	if noPidfdInfo.Load() {
		return 0, false
	}
	info := unix.PidfdInfo{Mask: unix.PIDFD_INFO_CREDS}
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(pidfd), unix.PIDFD_GET_INFO, uintptr(unsafe.Pointer(&info)))
	switch {
	case errno == unix.ENOTTY || errno == unix.EINVAL:
		noPidfdInfo.Store(true) // before 6.13
		return 0, false
	case errno != 0 || info.Mask&unix.PIDFD_INFO_CREDS == 0:
		return 0, false
	}
	return int(info.Euid), true
}
