// exitcode.go owns gpu-hold's exit codes as package hold names them: each
// is a row of the one table of outcomes, record.Outcomes.
package hold

import (
	"syscall"

	"github.com/gpu-hold/gpu-hold/internal/record"
)

// The exit codes; their meanings are in record.Outcomes.
const (
	ExitMaxHold       = record.ExitMaxHold
	ExitUsage         = record.ExitUsage
	ExitNotExecutable = record.ExitNotExecutable
	ExitNotFound      = record.ExitNotFound
	ExitQueue         = record.ExitQueue
	ExitMemFloor      = record.ExitMemFloor
	ExitDeviceHolders = record.ExitDeviceHolders
	ExitLeaseLost     = record.ExitLeaseLost
	ExitCancelled     = record.ExitCancelled
	ExitYielded       = record.ExitYielded
)

// ExitSignal is the code for an end by signal sig: 128+sig.
func ExitSignal(sig syscall.Signal) int { return 128 + int(sig) }
