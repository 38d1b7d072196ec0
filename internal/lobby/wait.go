// wait.go owns the lobby image (gpu-hold-lobby's main): adopt the
// ticket, wait until it is near its turn (or a signal, the allowance's
// end, the ticket's removal), and exec the full image back, which reports
// whatever happened.
package lobby

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/gpu-hold/gpu-hold/queue"
)

// backAfter: how long after the grant that woke it the lobby execs back.
const backAfter = 20 * time.Millisecond

// Main runs the lobby image. It returns (an exit status) only when it
// cannot exec back.
func Main() int {
	v, ok := os.LookupEnv(envLobby)
	if !ok {
		fmt.Fprintf(os.Stderr, "%s: only gpu-hold runs this, for a hold waiting in the queue\n", Binary)
		return 125
	}
	st, err := decode(envLobby, v)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", Binary, err)
		return 125
	}
	var sigs []os.Signal
	for _, s := range st.Signals {
		sigs = append(sigs, syscall.Signal(s))
	}
	sigc := make(chan os.Signal, len(sigs))
	signal.Notify(sigc, sigs...)
	w := wait(st, sigc)
	if st.Signal == 0 {
		st.Signal = Pending(sigc)
	}
	if w != nil {
		w.Handover() // a ticket removed meanwhile: the full image says so
	}
	err = back(*st)
	if w == nil {
		fmt.Fprintf(os.Stderr, "gpu-hold: cannot exec %s back from waiting (%v); the command was not run\n", st.Exe, err)
		return 125
	}
	w.Cancel()
	fmt.Fprintf(os.Stderr, "gpu-hold: cannot exec %s back from waiting (%v); ticket %d removed, the command not run\n", st.Exe, err, st.Ticket.Seq)
	return 125
}

// Pending is the signal sigc has got, 0 for none: the last look before an
// exec (execAs says what comes after it).
func Pending(sigc chan os.Signal) int {
	select {
	case s := <-sigc:
		return int(s.(syscall.Signal))
	default:
		return 0
	}
}

// wait adopts the ticket and waits; st.Signal says whether a signal ended
// it. Any failure ends it too: the full image meets it again and reports
// it. The waiter is nil when the ticket could not be adopted.
func wait(st *State, sigc chan os.Signal) queue.Handable {
	q, err := queue.OpenDir(st.Dir, st.Resource, queue.DirOptions{})
	if err != nil {
		return nil
	}
	w, err := queue.Adopt(q, st.Ticket)
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if !st.Deadline.IsZero() {
		ctx, cancel = context.WithDeadline(ctx, st.Deadline)
		defer cancel()
	}
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case s := <-sigc:
			st.Signal = int(s.(syscall.Signal))
			cancel()
		case <-ctx.Done():
		}
	}()
	if w.WaitAhead(ctx, st.Within) == nil {
		// Woken by a grant ahead: the exec back waits until that hold
		// has started its payload, rather than compete with it for CPU.
		select {
		case <-time.After(backAfter):
		case <-ctx.Done():
		}
	}
	cancel()
	<-watched
	return w
}

// back execs the full image with st.
func back(st State) error {
	env := environ(envProcs, envLobby, envResume)
	if st.HadProcs {
		env = append(env, envProcs+"="+st.Procs)
	}
	return execAs(st.Exe, append(env, encode(envResume, st)))
}
