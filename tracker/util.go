// util.go owns small helpers both backends share: exit-status decoding
// and uids.
package tracker

import (
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/record"
)

// ProbeError says why a backend cannot be used here.
type ProbeError struct {
	Backend string
	Reason  string
}

func (e *ProbeError) Error() string { return e.Backend + " tracker unavailable: " + e.Reason }

func itoa(n int) string { return strconv.Itoa(n) }

// setExitStatus fills an exit event from a wait status.
func setExitStatus(ev *record.Event, ws unix.WaitStatus) {
	switch {
	case ws.Exited():
		c := ws.ExitStatus()
		ev.ExitCode = &c
	case ws.Signaled():
		s := int(ws.Signal())
		ev.Signal = &s
	}
}

// uidOf reads the uid that owns pid; nil when it cannot be read.
func uidOf(pid int) *int {
	u := proc.UID(pid)
	if u < 0 {
		return nil
	}
	return &u
}
