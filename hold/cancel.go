// cancel.go owns ending a running hold from outside (`gpu-hold cancel`):
// the canceller signals the holder's gpu-hold SIGUSR1 through a pidfd
// opened after its identity was checked, with the ticket owner's authority,
// and the hold ends through its own teardown with cause cancelled.
package hold

import (
	"fmt"
	"strings"
	"syscall"

	"github.com/gpu-hold/gpu-hold/internal/fleetenv"
	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/record"
	"github.com/gpu-hold/gpu-hold/queue"
)

// CancelSignal is the signal that asks a hold to end as cancelled.
const CancelSignal = syscall.SIGUSR1

// endBy is the code and cause of a hold ended by signal sig.
func endBy(sig syscall.Signal) (int, record.Cause) {
	if sig == CancelSignal {
		return ExitCancelled, record.CauseCancelled
	}
	return ExitSignal(sig), record.CauseSignalled
}

// signalName names a signal the hold got for messages.
func signalName(sig syscall.Signal) string {
	if sig == CancelSignal {
		return "a cancel (SIGUSR1, gpu-hold cancel)"
	}
	return sig.String()
}

// CancelRunning asks the running hold of ticket t to end. uid is the
// canceller's: its owner or root only. The ticket is another user's input:
// the process it names is signalled only if it is alive by identity, is a
// gpu-hold, and the ticket's owner (whose authority the signal carries, so
// the kernel decides) may signal it.
func CancelRunning(t queue.Ticket, uid int) error {
	if uid != 0 && uid != t.UID {
		return fmt.Errorf("%s belongs to uid %d: only its owner or root may cancel it", t.Describe(), t.UID)
	}
	if t.HoldID == "" {
		return fmt.Errorf("%s is not a hold (gpu-hold reap's ticket, say): not cancelled", t.Describe())
	}
	if t.Host != "" && t.Host != fleetenv.TicketHost() {
		// An etcd ticket of another host: its pid means nothing here.
		return fmt.Errorf("%s runs on host %s, not this one (%s): run gpu-hold cancel there", t.Describe(), t.Host, fleetenv.TicketHost())
	}
	st, ok := proc.LiveStat(t.Holder)
	if !ok {
		return fmt.Errorf("the gpu-hold of %s is not running any more: nothing to cancel (if it died holding the token, run gpu-hold reap -r %s)", t.Describe(), t.Resource)
	}
	if !strings.HasPrefix(st.Comm, "gpu-hold") {
		return fmt.Errorf("%s names process %d (%s), which is not a gpu-hold: not signalled", t.Describe(), st.PID, st.Comm)
	}
	as, err := proc.As(t.UID)
	if err != nil {
		return fmt.Errorf("cannot cancel %s: %v", t.Describe(), err)
	}
	if as != nil {
		defer as.Close()
	}
	h, err := proc.Open(t.Holder)
	if err != nil {
		return fmt.Errorf("the gpu-hold of %s is not running any more: %v", t.Describe(), err)
	}
	defer h.Close()
	if err := as.Signal(h, CancelSignal); err != nil {
		return fmt.Errorf("cannot signal the gpu-hold of %s (pid %d): %v", t.Describe(), st.PID, err)
	}
	return nil
}
