// util.go owns small helpers both backends share: exit-status decoding,
// uids, and the bounds on recorded argv.
package tracker

import (
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// Bounds on what a record keeps of one exec's argv.
const (
	maxArgs   = 16
	maxArgLen = 256
)

// ProbeError says why a backend cannot be used here.
type ProbeError struct {
	Backend string
	Reason  string
}

func (e *ProbeError) Error() string { return e.Backend + " tracker unavailable: " + e.Reason }

func itoa(n int) string { return strconv.Itoa(n) }

// setExitStatus fills an exit event from a wait status.
func setExitStatus(ev *Event, ws unix.WaitStatus) {
	switch {
	case ws.Exited():
		c := ws.ExitStatus()
		ev.ExitCode = &c
	case ws.Signaled():
		s := int(ws.Signal())
		ev.Signal = &s
	}
}

// uidOf reads the real uid of pid; nil when it cannot be read.
func uidOf(pid int) *int {
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/"+strconv.Itoa(pid), &st); err != nil {
		return nil
	}
	u := int(st.Uid)
	return &u
}
