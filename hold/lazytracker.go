// lazytracker.go owns when the hold's tracker is made. The backend is
// chosen before the hold queues, by probes that load nothing (a host that
// cannot track must not make anyone wait, and says why at once); the eBPF
// tracker itself (programs, maps and ring buffer in the kernel) is loaded
// only once the ticket reaches the head of the queue, in the background
// while the wait goes on, or at the grant when it was granted at once. A
// hold that waits then costs the host its own process, not a lineage's
// worth of kernel memory.
package hold

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/record"
	"github.com/gpu-hold/gpu-hold/queue"
	"github.com/gpu-hold/gpu-hold/tracker"
)

// lazyTracker is the chosen backend and, once made, its tracker.
type lazyTracker struct {
	h       *holdRun
	backend string // tracker.BackendBPF or BackendProc
	once    sync.Once
	begun   atomic.Bool
	done    chan struct{} // closed when make has returned
	tr      *tracker.Lineage
	err     error
	note    string // make's fall-back notice, for the record (set before done closes)
}

// chooseTracker picks the backend per --track. procfs's tracker is made at
// once (it holds nothing); eBPF's is left to make.
func (h *holdRun) chooseTracker() (*lazyTracker, error) {
	lt := &lazyTracker{h: h, backend: tracker.BackendBPF, done: make(chan struct{})}
	switch h.o.Track {
	case "proc":
		lt.backend = tracker.BackendProc
	case "bpf":
		if err := tracker.ProbeBPFQuick(); err != nil {
			return nil, fmt.Errorf("--track=bpf: %v; or use --track=proc", err)
		}
	default:
		if err := tracker.ProbeBPFQuick(); err != nil {
			h.backendNote = h.fallBack(err)
			lt.backend = tracker.BackendProc
		}
	}
	if lt.backend == tracker.BackendProc {
		lt.start()
		if _, err := lt.get(); err != nil {
			return nil, err
		}
	}
	return lt, nil
}

// fallBack logs why --track=auto uses procfs, and returns the notice.
func (h *holdRun) fallBack(err error) string {
	reason := err.Error()
	note := "eBPF tracker unavailable, using procfs: " + reason
	ev := h.o.Log.Warn()
	if h.o.Resume != nil {
		ev = h.o.Log.Debug() // said once already, before the lobby
	}
	ev.Str("reason", reason).Msg(note)
	return note
}

// start makes the tracker in the background, once.
func (lt *lazyTracker) start() {
	lt.once.Do(func() {
		lt.begun.Store(true)
		go func() {
			defer close(lt.done)
			lt.tr, lt.err = lt.make()
		}()
	})
}

// get makes the tracker if start has not, and waits for it.
func (lt *lazyTracker) get() (*tracker.Lineage, error) {
	lt.start()
	<-lt.done
	return lt.tr, lt.err
}

// make is the load: eBPF's failure is --track=bpf's error, or
// --track=auto's fall-back to procfs.
func (lt *lazyTracker) make() (*tracker.Lineage, error) {
	h := lt.h
	opts := tracker.Options{Sink: h.rec.event, Flush: h.rec.flush, HoldID: h.id}
	if lt.backend == tracker.BackendProc {
		return tracker.New(tracker.BackendProc, opts)
	}
	tr, err := tracker.New(tracker.BackendBPF, opts)
	if err == nil {
		h.sweepPins()
		return tr, nil
	}
	if h.o.Track == "bpf" {
		return nil, fmt.Errorf("--track=bpf: %v; or use --track=proc", bpfReason(err))
	}
	// Made in the background while the hold waits: the notice reaches
	// the hold (and its record) at the grant, not from here.
	lt.note = h.fallBack(bpfReason(err))
	lt.backend = tracker.BackendProc
	return tracker.New(tracker.BackendProc, opts)
}

// close closes the tracker once made (waiting for a load under way), then
// restocks the spares when the stock is still low: an eBPF tracker's
// lineage has gone back to them when it could (tracker.Close).
func (lt *lazyTracker) close() {
	if !lt.begun.Load() {
		return
	}
	<-lt.done
	if lt.tr != nil {
		lt.tr.Close()
		lt.h.restockSpares(lt.tr)
	}
}

// atGrant is the tracker once the token is ours, with the backend and seal
// it has set in the result and the record. When it cannot be made the
// hold ends before its payload: record closed, token released.
func (h *holdRun) atGrant(lt *lazyTracker, grant queue.Grant) (*tracker.Lineage, error) {
	tr, err := lt.get()
	if err != nil {
		h.res.Code, h.res.Cause = ExitUsage, record.CauseError
		h.rec.close(&h.res, time.Now(), h.o.Log)
		grant.Release()
		return nil, &Error{Code: ExitUsage, Err: err}
	}
	if lt.note != "" {
		h.backendNote = lt.note
	}
	h.res.Backend, h.res.Seal = tr.Backend(), tr.SealMode()
	h.rec.update(func(hi *record.HoldInfo) {
		hi.Backend, hi.Seal, hi.BackendNote = h.res.Backend, h.res.Seal, h.backendNote
	})
	return tr, nil
}
