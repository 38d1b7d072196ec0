// lobby.go owns a waiting hold's move to the lobby image (package lobby),
// which waits at a fraction of this image's memory, and the adoption of
// its ticket when it comes back.
package hold

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/lobby"
	"github.com/gpu-hold/gpu-hold/queue"
)

// A hold moves to the lobby once it has waited lobbyAfter with more than
// lobbyWithin live tickets still ahead, and comes back when lobbyWithin
// are: the exec there and back (milliseconds of CPU) is paid only by
// waits long enough to be worth it, never by a chain of short holds, and
// the way back is one hand-off before the hold's turn, never on it.
const (
	lobbyAfter  = 2 * time.Second
	lobbyWithin = 1
)

// endSignals end a hold: while it waits, its ticket is removed.
var endSignals = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, CancelSignal}

// toLobby waits, while the wait may be long, and execs the lobby once it
// has been. It returns when it did not; a signal that came meanwhile is
// left in sigc.
func (h *holdRun) toLobby(ctx context.Context, w queue.Waiter, sigc chan os.Signal) {
	hw, self, path, ok := h.lobbyFor(w)
	if ok && h.stillFar(ctx, hw, sigc) {
		h.enterLobby(hw, self, path, sigc)
	}
}

// lobbyFor says whether this hold may wait in the lobby: a waiter of the
// directory queue, with nothing to draw, no yield, an allowance long
// enough, more than lobbyWithin tickets in the queue when it enqueued and
// the lobby installed beside this executable (self), at path. Whether
// they are still ahead is stillFar's first look: a look here as well
// would read every ticket ahead twice while a sweep queues.
func (h *holdRun) lobbyFor(w queue.Waiter) (hw queue.Handable, self, path string, ok bool) {
	o := &h.o
	hw, ok = w.(queue.Handable)
	if !ok || o.Resume != nil || o.Status != nil || o.Yield || o.Wait > 0 && o.Wait < 2*lobbyAfter {
		return nil, "", "", false
	}
	if hw.EnqueuedWithin(lobbyWithin) {
		return nil, "", "", false
	}
	self, err := lobby.Self()
	if err == nil {
		path, err = lobby.Path(self)
	}
	if err != nil {
		o.Log.Debug().Err(err).Msg("waiting in the full image")
		return nil, "", "", false
	}
	return hw, self, path, true
}

// enterLobby execs the lobby at path with this hold's ticket. It returns
// when it could not, or when a signal came first (left in sigc).
func (h *holdRun) enterLobby(hw queue.Handable, self, path string, sigc chan os.Signal) {
	o, log := &h.o, h.o.Log
	st := lobby.State{Exe: self, Dir: o.Dir, Resource: o.Resource, HoldID: h.id, Queued: h.queued, Within: lobbyWithin}
	if o.Wait > 0 {
		st.Deadline = h.queued.Add(o.Wait)
	}
	if sig := lobby.Pending(sigc); sig != 0 {
		sigc <- syscall.Signal(sig)
		return
	}
	log.Info().Uint64("ticket", h.ticket.Seq).Str("lobby", path).Msg("waiting in the lobby")
	err := lobby.Enter(path, hw, st, endSignals)
	log.Warn().Err(err).Msg("waiting in the full image")
}

// stillFar waits until lobbyAfter into the wait, and reports whether more
// than lobbyWithin tickets are still ahead then. A signal ends it early
// and is put back in sigc.
func (h *holdRun) stillFar(ctx context.Context, hw queue.Handable, sigc chan os.Signal) bool {
	pre, cancel := context.WithDeadline(ctx, h.queued.Add(lobbyAfter))
	defer cancel()
	signalled := watchSignal(pre, cancel, sigc)
	err := hw.WaitAhead(pre, lobbyWithin)
	if got := signalled(); got != nil {
		sigc <- got
		return false
	}
	return errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil
}

// adopt takes back the ticket this hold queued before the lobby.
func (h *holdRun) adopt() (queue.Waiter, error) {
	o, r := &h.o, h.o.Resume
	h.ticket = queue.Ticket{Seq: r.Ticket.Seq, Resource: r.Resource}
	if r.Dir != o.Dir || r.Resource != o.Resource {
		return nil, &Error{Code: ExitUsage, Err: fmt.Errorf("the waiting image held ticket %d of %s in %s, but this one is for %s in %s (did GPU_HOLD_DIR change?); the command was not run", r.Ticket.Seq, r.Resource, r.Dir, o.Resource, o.Dir)}
	}
	q, err := h.openQueue()
	if err != nil {
		return nil, &Error{Code: ExitUsage, Err: err}
	}
	w, err := queue.Adopt(q, r.Ticket)
	if errors.Is(err, queue.ErrRemoved) {
		return nil, h.waitFailed(err, nil)
	}
	if err != nil {
		return nil, &Error{Code: ExitUsage, Err: fmt.Errorf("taking back the ticket after waiting: %v; the command was not run", err)}
	}
	return w, nil
}

// resumedBy is the signal that ended the lobby's wait (nil: none).
func (h *holdRun) resumedBy() os.Signal {
	if h.o.Resume == nil || h.o.Resume.Signal == 0 {
		return nil
	}
	return syscall.Signal(h.o.Resume.Signal)
}
