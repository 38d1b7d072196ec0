// Package tracker follows the lineage of one payload: every process it
// creates, however it got away (setsid, double fork, another group or cgroup).
// tracker.go owns the Tracker interface that both backends implement and the
// constructor that picks one.
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

// Tracker follows one payload's lineage from its first instruction to the
// last exit of its last descendant. The hold drives it:
//
//	Prepare(cmd) -> cmd.Start() -> Started(pid) -> Live()... -> Seal() -> Live()... -> Close()
type Tracker interface {
	// Backend is BackendBPF or BackendProc.
	Backend() string
	// Prepare sets up cmd (SysProcAttr) so that the payload is a lineage
	// member before its first instruction runs. Called before cmd.Start.
	Prepare(cmd *exec.Cmd) error
	// Started tells the tracker the payload's identity, right after cmd.Start.
	Started(root proc.Ident) error
	// Live returns every lineage member that is alive now (zombies are
	// dead), each by identity with its current stat. It never returns the
	// hold itself.
	Live() ([]proc.Stat, error)
	// LiveIn is Live as seen by walk s, taken by the caller (a teardown
	// pass takes one walk and looks up the lineage, group and cgroup in it).
	LiveIn(s *proc.Snapshot) []proc.Stat
	// Changed receives a value (coalesced) when the tracker saw the lineage
	// change: a birth or an exit. A backend that cannot see births as they
	// happen (procfs) returns nil, and the caller rescans on its own.
	Changed() <-chan struct{}
	// Seal stops the lineage from growing: from now on a member that forks
	// is killed at the fork and, where the kernel has the kfunc, its child
	// at birth (eBPF; see SealOf). The procfs backend cannot stop forks;
	// its Seal records the instant and the caller repeats its KILL passes.
	Seal() error
	// Counters reports events the tracker lost or could not store.
	Counters() record.Counters
	// Close stops tracking and frees kernel objects (unless pinned).
	Close() error
}

// Finisher is implemented by trackers whose Close frees kernel objects
// that take time to free (detaching eBPF programs patches the kernel's
// text on every CPU): Finish ends the tracking once the lineage is ended
// (the last events read, the counters kept), and Close, later, frees what
// is left. A hold finishes before its record is closed and closes after
// the token is released.
type Finisher interface {
	Finish()
}

// Accounted is a Tracker with a kernel-side account of its live members
// that a walk of /proc cannot outrun: a process that forks and exits in a
// loop is born after a walk lists /proc and gone before it reads the stat,
// but it is always in the account (the eBPF lineage map; for procfs, the
// hold's own children, of which one of the loop's is always one, alive or
// a zombie). A teardown ends only when the account agrees that nothing is
// alive, and skips the walk when it says so.
type Accounted interface {
	// Account reports whether the account names a member alive now
	// (some), and whether it is complete (known: false when a member was
	// lost to a full map, the account cannot be read, or procfs is not yet
	// sealed and its reaper may empty the list under the reader).
	Account() (some, known bool)
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

// Seal modes, as SealOf and the record's hold.seal name them.
const (
	SealBirth  = string(bpf.SealBirth) // eBPF: the forking member at the fork, its child at birth
	SealFork   = string(bpf.SealFork)  // eBPF without the kfunc: the forking member at the fork, its child by the KILL pass
	SealPasses = "passes"              // procfs: nothing stops a fork; KILL passes repeat until the lineage is empty
)

// SealOf says how tr's seal stops its lineage from growing: SealBirth,
// SealFork, SealPasses, or "" when it is not known (a dead holder's pins).
func SealOf(tr Tracker) string {
	if s, ok := tr.(interface{ SealMode() bpf.SealMode }); ok {
		return string(s.SealMode())
	}
	return SealPasses
}

// New returns a tracker for backend: BackendBPF or BackendProc.
func New(backend string, opts Options) (Tracker, error) {
	switch backend {
	case BackendProc:
		return newProcTracker(opts)
	case BackendBPF:
		return newBPFTracker(opts)
	}
	return nil, &UnknownBackendError{Name: backend}
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
