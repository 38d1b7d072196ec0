// payload.go owns watching the payload's own process end without reaping
// it. Until teardown is over its zombie keeps its pid, and so its process
// group number, from being reused: a process that is in that group is then
// surely in the payload's group, never in a new group that took the number.
package hold

import (
	"syscall"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/record"
)

// payloadExit is how the payload's own process ended, and when.
type payloadExit struct {
	proc.Exit
	At time.Time
}

// waitNoReap blocks until pid (our child) exits and returns how, leaving
// it a zombie for os/exec to reap later.
func waitNoReap(pid int) (payloadExit, error) {
	ex, _, err := proc.PeekExit(pid, true)
	return payloadExit{Exit: ex, At: time.Now()}, err
}

// exitCode maps the payload's end to the hold's exit code.
func (ex payloadExit) exitCode() (int, record.Cause, syscall.Signal) {
	if ex.Signal != 0 {
		return ExitSignal(ex.Signal), record.CauseSignal, ex.Signal
	}
	return ex.Code, record.CauseExited, 0
}

// event is the payload's exit as its parent saw it: the one exit status
// every backend knows exactly.
func (ex payloadExit) event(root proc.Ident) record.Event {
	ev := record.Event{Kind: record.Exit, Time: ex.At, Ident: root}
	if ex.Signal != 0 {
		s := int(ex.Signal)
		ev.Signal = &s
	} else {
		c := ex.Code
		ev.ExitCode = &c
	}
	return ev
}
