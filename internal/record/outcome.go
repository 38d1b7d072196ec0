// outcome.go owns the one table of a hold's outcomes: each cause the
// record and the metrics name, the exit code gpu-hold returns for it, and
// what it means. The exit codes (package hold), the man page, the metrics'
// series and the docs are made from this table or checked against it.
package record

// Cause says why a hold ended. The hold may write others; the reader does
// not check them.
type Cause string

// The causes, in the table's order.
const (
	CauseExited        Cause = "exited"         // the payload exited by itself
	CauseSignal        Cause = "signal"         // the payload was killed by a signal
	CauseMaxHold       Cause = "max-hold"       // the max hold ran out
	CauseSignalled     Cause = "signalled"      // the hold itself got TERM/INT/HUP
	CauseQueue         Cause = "queue"          // never got the token
	CauseLeaseLost     Cause = "lease-lost"     // the etcd lease was lost while holding
	CauseCancelled     Cause = "cancelled"      // gpu-hold cancel ended the running hold
	CauseYielded       Cause = "yielded"        // a --yield hold gave the token up
	CauseMemFloor      Cause = "mem-floor"      // available memory fell below --mem-floor
	CauseDeviceHolders Cause = "device-holders" // a process outside the lineage held the device
	CauseError         Cause = "error"          // gpu-hold's own failure
	CauseExecFailed    Cause = "exec-failed"    // the payload could not be started
)

// Exit codes that are gpu-hold's own (the others are the payload's).
const (
	ExitMaxHold       = 124 // like timeout(1)
	ExitQueue         = 75
	ExitLeaseLost     = 76
	ExitCancelled     = 77
	ExitYielded       = 79
	ExitMemFloor      = 72
	ExitDeviceHolders = 73
	ExitUsage         = 125
	ExitNotExecutable = 126
	ExitNotFound      = 127
)

// Codes that are not one number.
const (
	CodePayload = -1 // the payload's own exit code, N
	CodeSignal  = -2 // 128+S for the signal S that ended the payload or the hold
)

// Outcome is one row of the table.
type Outcome struct {
	Cause   Cause
	Code    int    // an exit code, or CodePayload or CodeSignal
	Meaning string // one line, for the man page and the docs
}

// Outcomes is the table. A cause may have more than one row (exec-failed:
// 126 and 127).
var Outcomes = []Outcome{
	{CauseExited, CodePayload, "the payload exited with N"},
	{CauseSignal, CodeSignal, "the payload was killed by signal S"},
	{CauseSignalled, CodeSignal, "the hold itself got TERM, INT or HUP (143, 130, 129), after its teardown"},
	{CauseMaxHold, ExitMaxHold, "the max hold ran out"},
	{CauseQueue, ExitQueue, "the queue never came round within the wait allowance, or the ticket was removed"},
	{CauseLeaseLost, ExitLeaseLost, "the etcd lease was lost while holding (--queue etcd://): the payload was ended"},
	{CauseCancelled, ExitCancelled, "gpu-hold cancel ended the running hold, through its teardown"},
	{CauseYielded, ExitYielded, "a --yield hold gave the token to a job that queued"},
	{CauseMemFloor, ExitMemFloor, "available memory fell below --mem-floor"},
	{CauseDeviceHolders, ExitDeviceHolders, "--device-holders=fail and a process outside the lineage still held the device"},
	{CauseError, ExitUsage, "usage error, or gpu-hold's own failure"},
	{CauseExecFailed, ExitNotExecutable, "the payload could not be executed"},
	{CauseExecFailed, ExitNotFound, "the payload was not found"},
}

// Causes lists every cause of the table once, in its order.
func Causes() []Cause {
	var cs []Cause
	seen := map[Cause]bool{}
	for _, o := range Outcomes {
		if !seen[o.Cause] {
			seen[o.Cause] = true
			cs = append(cs, o.Cause)
		}
	}
	return cs
}
