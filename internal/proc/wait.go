// wait.go owns looking at a child's exit without reaping it (waitid with
// WNOWAIT): the zombie keeps its pid, so its identity stays valid.
package proc

import (
	"errors"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Exit is how a child ended.
type Exit struct {
	Code   int            // exit code when Signal is 0
	Signal syscall.Signal // the signal that killed it, or 0
}

// siginfoChild is the start of siginfo_t for SIGCHLD (the same layout on
// every 64-bit Linux architecture).
type siginfoChild struct {
	Signo  int32
	Errno  int32
	Code   int32
	_      int32
	Pid    int32
	UID    uint32
	Status int32
}

// cldExited is si_code CLD_EXITED: the child called exit.
const cldExited = 1

// PeekExit reports whether child pid has exited and how, without reaping
// it. With block it waits for the exit; without, ok is false while the
// child runs.
func PeekExit(pid int, block bool) (ex Exit, ok bool, err error) {
	flags := unix.WEXITED | unix.WNOWAIT
	if !block {
		flags |= unix.WNOHANG
	}
	var info unix.Siginfo
	for {
		err = unix.Waitid(unix.P_PID, pid, &info, flags, nil)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		return Exit{}, false, err
	}
	si := (*siginfoChild)(unsafe.Pointer(&info))
	if int(si.Pid) != pid {
		return Exit{}, false, nil // WNOHANG: still running
	}
	if si.Code == cldExited {
		return Exit{Code: int(si.Status)}, true, nil
	}
	return Exit{Signal: syscall.Signal(si.Status)}, true, nil // CLD_KILLED, CLD_DUMPED
}
