// payload.go owns watching the payload's own process end without reaping
// it. Until teardown is over its zombie keeps its pid, and so its process
// group number, from being reused: a process that is in that group is then
// surely in the payload's group, never in a new group that took the number.
package hold

import (
	"errors"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/proc"
	"github.com/gpu-hold/gpu-hold/tracker"
)

// payloadExit is how the payload's own process ended.
type payloadExit struct {
	Code   int            // exit code when Signal is 0
	Signal syscall.Signal // the signal that killed it, or 0
	At     time.Time
}

// siginfoChild is the start of siginfo_t for SIGCHLD (the layout is the
// same on every 64-bit Linux architecture).
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

// waitNoReap blocks until pid (our child) exits and returns how, leaving
// it a zombie for os/exec to reap later.
func waitNoReap(pid int) (payloadExit, error) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return payloadExit{At: time.Now()}, err
		}
		break
	}
	si := (*siginfoChild)(unsafe.Pointer(&info))
	ex := payloadExit{At: time.Now()}
	switch si.Code {
	case cldExited:
		ex.Code = int(si.Status)
	default: // CLD_KILLED, CLD_DUMPED
		ex.Signal = syscall.Signal(si.Status)
	}
	return ex, nil
}

// exitCode maps the payload's end to the hold's exit code.
func (ex payloadExit) exitCode() (int, tracker.Cause, syscall.Signal) {
	if ex.Signal != 0 {
		return ExitSignal(ex.Signal), CauseSignal, ex.Signal
	}
	return ex.Code, CauseExited, 0
}

// event is the payload's exit as its parent saw it: the one exit status
// every backend knows exactly.
func (ex payloadExit) event(root proc.Ident) tracker.Event {
	ev := tracker.Event{Kind: tracker.Exit, Time: ex.At, Ident: root}
	if ex.Signal != 0 {
		s := int(ex.Signal)
		ev.Signal = &s
	} else {
		c := ex.Code
		ev.ExitCode = &c
	}
	return ev
}
