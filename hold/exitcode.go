// exitcode.go owns the exit codes of gpu-hold (the table in the README).
package hold

import "syscall"

const (
	// ExitMaxHold: the max hold ran out (like timeout(1)).
	ExitMaxHold = 124
	// ExitUsage: bad input or gpu-hold's own failure.
	ExitUsage = 125
	// ExitNotExecutable: the payload could not be executed.
	ExitNotExecutable = 126
	// ExitNotFound: the payload command was not found.
	ExitNotFound = 127
	// ExitQueue: the queue never came round within the wait allowance, or the ticket was removed.
	ExitQueue = 75
	// ExitMemFloor: available memory fell below --mem-floor and the hold was ended.
	ExitMemFloor = 72
	// ExitDeviceHolders: --device-holders=fail and a process outside the lineage still held the device.
	ExitDeviceHolders = 73
	// ExitLeaseLost: the token's etcd lease was lost and the payload ended.
	ExitLeaseLost = 76
	// ExitCancelled: gpu-hold cancel ended the hold (its owner or root), through its teardown.
	ExitCancelled = 77
	// ExitYielded: a yielding hold (--yield) gave the token to a ticket that does not yield.
	ExitYielded = 79
)

// ExitSignal is the code for an end by signal sig: 128+sig.
func ExitSignal(sig syscall.Signal) int { return 128 + int(sig) }
