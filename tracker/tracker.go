// Package tracker follows the lineage of one payload: every process it
// creates, however it got away (setsid, double fork, another group or cgroup).
// tracker.go owns the backend interface that the implementations behind a
// Lineage satisfy and the constructor that picks one.
package tracker

import (
	"os"
	"os/exec"

	"github.com/gpu-hold/gpu-hold/bpf"

	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/record"
)

// Backend names, as given to --track and written in records.
const (
	BackendBPF  = "bpf"
	BackendProc = "proc"
)

// backend is what each tracker implementation (eBPF, procfs, a dead
// holder's record) does behind a Lineage: the methods Lineage documents,
// the optional ones answering ErrNotSupported (or doing nothing) where the
// implementation has no such capability.
type backend interface {
	Backend() string
	Prepare(cmd *exec.Cmd) error
	Started(root proc.Ident) error
	Live() ([]proc.Stat, error)
	LiveIn(s *proc.Snapshot) []proc.Stat
	Changed() <-chan struct{}
	Seal() error
	Counters() record.Counters
	Close() error

	sealMode() string
	account() (some, known bool, err error)
	snapshot() (*proc.Snapshot, bool)
	finish() error
	pin() (string, error)
	unpin() error
	programs() string
	has(id proc.Ident) (bool, error)
	cgroup() string
}

// Options configure a tracker.
type Options struct {
	// Sink receives events for the record; nil discards them.
	Sink record.Sink
	// Flush, when not nil, is called after each batch of events went to
	// Sink (the eBPF backend's drains): the record writes them out then,
	// not up to its batch delay later.
	Flush func()
	// HoldID names the hold (used for pins and to keep holds apart).
	HoldID string
	// Seal forces the eBPF seal (tests); "" means bpf.HostSeal's choice.
	Seal bpf.SealMode
}

// Seal modes, as Lineage.SealMode and the record's hold.seal name them.
const (
	SealBirth  = string(bpf.SealBirth) // eBPF: the forking member at the fork, its child at birth
	SealFork   = string(bpf.SealFork)  // eBPF without the kfunc: the forking member at the fork, its child by the KILL pass
	SealPasses = "passes"              // procfs: nothing stops a fork; KILL passes repeat until the lineage is empty
)

// New returns a live lineage tracked by the backend name names:
// BackendBPF or BackendProc.
func New(name string, opts Options) (*Lineage, error) {
	var b backend
	var err error
	switch name {
	case BackendProc:
		b, err = newProcTracker(opts)
	case BackendBPF:
		b, err = newBPFTracker(opts)
	default:
		return nil, &UnknownBackendError{Name: name}
	}
	if err != nil {
		return nil, err
	}
	return lineageOf(b), nil
}

// UnknownBackendError is returned for a --track value that names no backend.
type UnknownBackendError struct{ Name string }

func (e *UnknownBackendError) Error() string {
	return "unknown tracker backend " + `"` + e.Name + `"` + ": use --track=auto, --track=bpf or --track=proc"
}

// primeGoPidfdCheck makes Go's os package run its once-per-process pidfd
// check now, before the hold waits. That check forks a short-lived child
// of its own the first time a process is started or found: done inside
// the payload's cmd.Start, it would cost the hand-off a fork and a wait,
// and the eBPF lineage would admit (and record) it beside the payload.
func primeGoPidfdCheck() {
	if p, err := os.FindProcess(os.Getpid()); err == nil {
		p.Release()
	}
}
