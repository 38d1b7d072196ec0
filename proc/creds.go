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

// EUID returns pid's effective uid, or -1 when it cannot be read: from a
// pidfd where the kernel answers PIDFD_GET_INFO (Linux 6.13), else as its
// status states it. The pidfd spares formatting the whole status, which a
// queue scan would otherwise pay for every live ticket, and /proc's
// hidepid does not hide it.
func EUID(pid int) int {
	if uid, ok := pidfdEUID(pid); ok {
		return uid
	}
	f := statusUIDs(pid)
	if len(f) < 2 {
		return -1
	}
	uid, err := strconv.Atoi(f[1])
	if err != nil {
		return -1
	}
	return uid
}

// noPidfdInfo is set once the kernel is known not to answer PIDFD_GET_INFO.
var noPidfdInfo atomic.Bool

// pidfdEUID asks the kernel for pid's credentials through a pidfd; ok is
// false when it cannot say (no such process, or no such ioctl).
func pidfdEUID(pid int) (uid int, ok bool) {
	if noPidfdInfo.Load() {
		return 0, false
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		if errors.Is(err, unix.ENOSYS) {
			noPidfdInfo.Store(true) // no pidfds (before 5.3)
		}
		return 0, false
	}
	defer unix.Close(fd)
	info := unix.PidfdInfo{Mask: unix.PIDFD_INFO_CREDS}
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.PIDFD_GET_INFO, uintptr(unsafe.Pointer(&info)))
	switch {
	case errno == unix.ENOTTY || errno == unix.EINVAL:
		noPidfdInfo.Store(true) // before 6.13
		return 0, false
	case errno != 0 || info.Mask&unix.PIDFD_INFO_CREDS == 0:
		return 0, false
	}
	return int(info.Euid), true
}
