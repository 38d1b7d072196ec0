// resume.go owns taking over a dead holder's lineage for teardown: from the
// holder's pinned eBPF lineage when it left one (tracking went on after it
// died), else from the identities its record names, widened by a /proc
// walk to their live descendants.
package tracker

import (
	"os/exec"
	"sync"

	"github.com/gpu-hold/gpu-hold/bpf"
	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/record"
)

// Sources of a resumed lineage, as recorded in the reap section.
const (
	SourceBPFPin = "bpf-pin"
	SourceRecord = "record"
)

// HoldIDEnv is the environment variable that carries the hold id into the
// payload, and so into every descendant that keeps its environment.
const HoldIDEnv = "GPU_HOLD_ID"

// Claim is what a reaper believes of a dead holder's lineage. Everything
// in it comes from the shared queue directory, so the reaper sets only
// what it checked: PinOK when the ticket is one only root can have written
// (only root pins), IDs only from a record the holder's own user wrote.
type Claim struct {
	HoldID string
	Holder proc.Ident   // the dead holder process the ticket names
	UID    int          // the ticket file's owner
	PinOK  bool         // the hold's pins may be the holder's
	IDs    []proc.Ident // live identities its record names
}

// Resume returns the claimed lineage, for teardown only
// (Prepare and Started are not used), and where the lineage came from.
// sink receives what a pinned lineage still reports. A pinned tracker must
// be unpinned (Lineage.Unpin) after the teardown.
//
// A pin is used only when the process it names as its holder is the
// ticket's holder: a hold id alone, which anyone can copy into a ticket,
// never opens a live hold's lineage. Without a pin, the lineage is the
// record's identities, every process of uid whose environment still
// carries the hold's id (a holder killed before its record named its
// payload leaves that much), and their descendants.
func Resume(c Claim, sink record.Sink) (*Lineage, string) {
	if c.HoldID != "" && c.PinOK {
		if h, err := bpf.PinnedHolder(c.HoldID); err == nil && h == c.Holder {
			if tr, err := OpenPinnedBPF(c.HoldID, Options{Sink: sink, HoldID: c.HoldID}); err == nil {
				return tr, SourceBPFPin
			}
		}
	}
	t := newStaticTracker(c.IDs)
	if c.HoldID != "" {
		t.holdID = c.HoldID
		t.uid = c.UID
	}
	return lineageOf(t), SourceRecord
}

// staticTracker knows a set of identities and treats their descendants as
// members too (a child of a member is a member).
type staticTracker struct {
	noCaps
	mu      sync.Mutex
	members map[proc.Ident]bool
	holdID  string // the hold id whose environment entry marks its processes ("": none)
	uid     int    // the only uid a marked process may have
}

func newStaticTracker(ids []proc.Ident) *staticTracker {
	t := &staticTracker{members: make(map[proc.Ident]bool, len(ids))}
	for _, id := range ids {
		t.members[id] = true
	}
	return t
}

func (t *staticTracker) Backend() string          { return BackendProc }
func (t *staticTracker) Prepare(*exec.Cmd) error  { return nil }
func (t *staticTracker) Started(proc.Ident) error { return nil }
func (t *staticTracker) Changed() <-chan struct{} { return nil }
func (t *staticTracker) Seal() error              { return nil }
func (t *staticTracker) Close() error             { return nil }

// sealMode: a record's identities have no seal of their own; the
// teardown's KILL passes end them (they keep no account, and have nothing
// to pin, finish or load: noCaps).
func (t *staticTracker) sealMode() string { return SealPasses }

func (t *staticTracker) Counters() record.Counters {
	t.mu.Lock()
	defer t.mu.Unlock()
	return record.Counters{Members: uint64(len(t.members))}
}

// Live walks /proc: known members that are still the same process, and
// every live descendant of one.
func (t *staticTracker) Live() ([]proc.Stat, error) {
	s, err := proc.TakeSnapshot()
	if err != nil {
		return nil, err
	}
	return t.LiveIn(s), nil
}

// LiveIn is Live over the caller's walk.
func (t *staticTracker) LiveIn(s *proc.Snapshot) []proc.Stat {
	t.mu.Lock()
	defer t.mu.Unlock()
	var live []proc.Stat
	var roots []int
	for id := range t.members {
		if st, ok := s.ByPID[id.PID]; ok && st.Start == id.Start {
			roots = append(roots, st.PID)
			if !st.Dead() {
				live = append(live, st)
			}
		}
	}
	if t.holdID != "" {
		for pid, st := range s.ByPID {
			if t.members[st.Ident] || st.Dead() || !t.marked(pid) {
				continue
			}
			t.members[st.Ident] = true
			roots = append(roots, pid)
			live = append(live, st)
		}
	}
	s.Descend(roots, func(st proc.Stat) bool {
		if t.members[st.Ident] {
			return false // already counted, and its subtree with it
		}
		t.members[st.Ident] = true
		if !st.Dead() {
			live = append(live, st)
		}
		return true
	})
	return live
}

// marked reports whether pid carries the hold's environment entry and
// belongs to the dead holder's user (nobody else's process is ever taken
// for a member on its environment alone).
func (t *staticTracker) marked(pid int) bool {
	if u := uidOf(pid); u == nil || *u != t.uid {
		return false
	}
	return CarriesHoldID(pid, t.holdID)
}

// CarriesHoldID reports whether pid's environment carries hold id's entry.
func CarriesHoldID(pid int, holdID string) bool {
	env, err := proc.ReadFile(pid, "environ")
	return err == nil && proc.EnvHas(env, HoldIDEnv, holdID)
}
