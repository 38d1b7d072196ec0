// lineage.go owns Lineage, the one handle on a payload's lineage that hold,
// reap, teardown and guard use, whether opened live (New) or from a dead
// holder's pins (Resume, OpenPinnedBPF): the optional capabilities are its
// methods, answering ErrNotSupported where the backend behind it has none.
package tracker

import (
	"errors"
	"os/exec"

	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/record"
)

// ErrNotSupported is what a capability of a Lineage answers when its
// backend does not have it (a procfs lineage cannot be pinned, a record's
// identities keep no kernel-side account).
var ErrNotSupported = errors.New("not supported by this lineage's tracker backend")

// Lineage follows one payload's lineage from its first instruction to the
// last exit of its last descendant. The hold drives it:
//
//	Prepare(cmd) -> cmd.Start() -> Started(pid) -> Live()... -> Seal() -> Live()... -> Finish() -> Close()
type Lineage struct{ b backend }

func lineageOf(b backend) *Lineage { return &Lineage{b: b} }

// Backend is BackendBPF or BackendProc.
func (l *Lineage) Backend() string { return l.b.Backend() }

// Prepare sets up cmd (SysProcAttr) so that the payload is a lineage
// member before its first instruction runs. Called before cmd.Start.
func (l *Lineage) Prepare(cmd *exec.Cmd) error { return l.b.Prepare(cmd) }

// Started tells the lineage the payload's identity, right after cmd.Start.
func (l *Lineage) Started(root proc.Ident) error { return l.b.Started(root) }

// Live returns every member alive now (zombies are dead), each by identity
// with its current stat. It never returns the hold itself.
func (l *Lineage) Live() ([]proc.Stat, error) { return l.b.Live() }

// LiveIn is Live as seen by walk s, taken by the caller.
func (l *Lineage) LiveIn(s *proc.Snapshot) []proc.Stat { return l.b.LiveIn(s) }

// Changed receives a value (coalesced) on a birth or an exit; nil when the
// backend cannot see them as they happen (the caller rescans on its own).
func (l *Lineage) Changed() <-chan struct{} { return l.b.Changed() }

// Seal stops the lineage from growing, as far as its backend can
// (SealMode says how).
func (l *Lineage) Seal() error { return l.b.Seal() }

// SealMode says how Seal stops the lineage from growing: SealBirth,
// SealFork or SealPasses.
func (l *Lineage) SealMode() string { return l.b.sealMode() }

// Counters reports events the lineage lost or could not store.
func (l *Lineage) Counters() record.Counters { return l.b.Counters() }

// Account reports whether the kernel-side account of live members (one a
// walk of /proc cannot outrun) names a member alive now (some), and
// whether it is complete (known: false when a member was lost to a full
// map, the account cannot be read, or procfs is not yet sealed). err is
// ErrNotSupported where the backend keeps no account.
func (l *Lineage) Account() (some, known bool, err error) { return l.b.account() }

// Snapshot is what a teardown pass reads to find the members without a
// walk of /proc (the pass adds the group and the cgroup to it): nothing
// for a lineage read from the kernel's own account by LiveIn (eBPF), the
// processes below the hold for procfs. ok is false when only a walk will do.
func (l *Lineage) Snapshot() (s *proc.Snapshot, ok bool) { return l.b.snapshot() }

// Finish ends the tracking once the lineage is ended (the last events
// read, the counters kept); Close, later, frees what is left. Where freeing
// is cheap (procfs), finishing is closing. A hold finishes before its
// record is closed and closes after the token is released.
func (l *Lineage) Finish() error { return l.b.finish() }

// Pin pins the lineage under /sys/fs/bpf/gpu-hold/<hold id>/ so that the
// kernel keeps tracking it if the holder dies, and returns the directory
// (ErrNotSupported: procfs).
func (l *Lineage) Pin() (string, error) { return l.b.pin() }

// Unpin removes the pins: after Close the kernel objects are freed
// (ErrNotSupported: nothing was pinnable).
func (l *Lineage) Unpin() error { return l.b.unpin() }

// Programs says where an eBPF lineage's programs came from: "spare" or
// "loaded" (by this hold); "" where there are none of this hold's own.
func (l *Lineage) Programs() string { return l.b.programs() }

// Close stops tracking and frees kernel objects (unless pinned).
func (l *Lineage) Close() error { return l.b.Close() }

// Has reports whether id is a member now, by the kernel's word alone
// (ErrNotSupported: ask Live).
func (l *Lineage) Has(id proc.Ident) (bool, error) { return l.b.has(id) }

// Cgroup is the hold's cgroup, relative to the cgroup2 mount, that the
// lineage counts its members in ("": none it knows of).
func (l *Lineage) Cgroup() string { return l.b.cgroup() }

// noCaps is the answer of a backend to the capabilities it does not have;
// a backend embeds it and defines what it can do.
type noCaps struct{}

func (noCaps) sealMode() string                 { return "" }
func (noCaps) account() (bool, bool, error)     { return false, false, ErrNotSupported }
func (noCaps) snapshot() (*proc.Snapshot, bool) { return nil, false }
func (noCaps) finish() error                    { return nil }
func (noCaps) pin() (string, error)             { return "", ErrNotSupported }
func (noCaps) unpin() error                     { return ErrNotSupported }
func (noCaps) programs() string                 { return "" }
func (noCaps) has(proc.Ident) (bool, error)     { return false, ErrNotSupported }
func (noCaps) cgroup() string                   { return "" }
