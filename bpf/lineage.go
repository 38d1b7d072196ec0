// lineage.go owns one hold's loaded copy of lineage.bpf.c: loading and
// attaching it, the launcher and seal switches, and reading the members and
// counters back out of its maps.
package bpf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// Capacity is how many live members one hold's lineage map holds
// (LINEAGE_CAPACITY in lineage.bpf.c). Children past it are counted in
// Counters.Overflow and flagged in their event; they are never evicted
// silently.
const Capacity = 65536

// DefaultEventBytes is the ring buffer size: about 40,000 fork or exit
// events, or 6,000 execs, waiting to be read at once.
const DefaultEventBytes = 4 << 20

// Member flags, as stored in the lineage map and repeated in events.
const (
	MemberRoot          = 1 // the payload, admitted as the launcher's child
	MemberKilledAtBirth = 2 // born to a member after the seal and killed at the fork (SealBirth)
	MemberBornSealed    = 4 // born to a member after the seal, left to the KILL pass (SealFork)
)

// Options configure Load.
type Options struct {
	// HoldID names the hold: it is stored in every member and names the pin
	// directory. Letters, digits, '.', '_' and '-' only.
	HoldID string
	// EventBytes is the ring buffer size, a power of two multiple of the
	// page size; 0 means DefaultEventBytes.
	EventBytes uint32
	// Capacity overrides the lineage map's capacity (tests); 0 means Capacity.
	Capacity uint32
	// Seal chooses the compiled seal (tests); "" means HostSeal's choice.
	Seal SealMode
}

// Member is one process of the lineage as the kernel recorded it.
type Member struct {
	PID     int    // tgid
	Parent  int    // tgid that forked it; the launcher for the payload
	StartNs uint64 // task->start_boottime
	HoldID  uint64 // HashHoldID of the hold that admitted it
	Flags   uint32 // MemberRoot, MemberKilledAtBirth, MemberBornSealed
}

// StartTicks is the member's start time as /proc/PID/stat field 22 gives it.
func (m Member) StartTicks() uint64 { return NsToTicks(m.StartNs) }

// NsToTicks converts a task's start_boottime (ns) to the clock ticks of
// /proc/PID/stat field 22 (USER_HZ is 100 on every Linux ABI).
func NsToTicks(ns uint64) uint64 { return ns / 10_000_000 }

// Root says which child of the launcher was admitted last: the payload.
type Root struct {
	PID     int    // 0 until the launcher forked
	StartNs uint64 // its start_boottime
	Forks   uint32 // children of the launcher admitted; the last one is the payload
}

// Counters are what the programs could not do, and how much they did.
type Counters struct {
	Admitted      uint64 // members ever admitted
	Overflow      uint64 // children the full lineage map could not store
	Lost          uint64 // ring buffer reservations that failed (events lost)
	KilledAtBirth uint64 // children killed at the fork after the seal (SealBirth only)
	// Live is never fewer than the entries in the lineage map (counted up
	// before an insert, down after a delete): 0 means it is empty, read in
	// one lookup. LiveUnknown when the pinned maps predate the count.
	Live uint64
}

// LiveUnknown is Counters.Live of a lineage pinned by a build of gpu-hold
// whose state map has no count: never 0, so no one takes it for empty.
const LiveUnknown = ^uint64(0)

// Lineage is one hold's loaded programs, maps and links. Close it.
type Lineage struct {
	holdID string
	id     uint64
	seal   SealMode // "" for a lineage opened from pins
	maps   lineageMaps
	progs  lineagePrograms
	links  []link.Link
	spare  bool // taken from the spares (TakeSpare), not loaded by this process
	// req is the seal request a spare of this copy is named by: set when
	// it was loaded or taken as the environment asks (so Recycle may give
	// it back), empty when a seal or a size was forced or it was opened
	// from pins.
	req string
}

// validHoldID reports whether id is 1 to 200 of letters, digits, '.', '_'
// and '-' (a pin directory name). A loop, not a regexp: every gpu-hold
// invocation would pay for compiling one at start-up.
func validHoldID(id string) bool {
	if len(id) == 0 || len(id) > 200 {
		return false
	}
	for _, c := range []byte(id) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// HashHoldID is the 64-bit hold id the kernel stores for a hold name (FNV-1a).
func HashHoldID(holdID string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(holdID))
	return h.Sum64()
}

// Load loads a fresh copy of the programs and maps for one hold and attaches
// the programs. It tracks nothing until SetLauncher names the process that
// forks the payload.
func Load(opts Options) (*Lineage, error) {
	if opts.HoldID != "" && !validHoldID(opts.HoldID) {
		return nil, fmt.Errorf("hold id %q: use letters, digits, '.', '_' and '-' only", opts.HoldID)
	}
	seal, err := sealFor(opts)
	if err != nil {
		return nil, err
	}
	l, err := loadObjects(seal, opts)
	if err != nil {
		return nil, err
	}
	if opts == (Options{HoldID: opts.HoldID}) {
		l.req, _ = sealRequest()
	}
	return l.begin(opts.HoldID)
}

// sealFor is the seal opts asks for, else the host's.
func sealFor(opts Options) (SealMode, error) {
	if opts.Seal != "" {
		return opts.Seal, nil
	}
	c, err := HostSeal()
	return c.Mode, err
}

// loadObjects loads the programs and maps of seal's copy, unattached and
// unconfigured: what a spare holds.
func loadObjects(seal SealMode, opts Options) (*Lineage, error) {
	// BPF memory is charged to the memory cgroup (Linux 5.11+), not
	// RLIMIT_MEMLOCK: no rlimit to raise (docs/TRACKERS.md states the floor).
	// The embedded object is CO-RE relocated against this kernel's BTF.
	spec, err := specFor(seal)
	if err != nil {
		return nil, err
	}
	if opts.EventBytes != 0 {
		spec.Maps[lineageMapEvents].MaxEntries = opts.EventBytes
	}
	if opts.Capacity != 0 {
		spec.Maps[lineageMapLineage].MaxEntries = opts.Capacity
	}
	// Only programs and maps: the .bss variables exist for bpf2go's types.
	var objs struct {
		lineagePrograms
		lineageMaps
	}
	if err := spec.LoadAndAssign(&objs, loadOptions()); err != nil {
		return nil, loadError(err)
	}
	return &Lineage{seal: seal, maps: objs.lineageMaps, progs: objs.lineagePrograms}, nil
}

// begin names the hold in the config map and attaches the programs (a
// spare may come attached); on failure the lineage is closed.
func (l *Lineage) begin(holdID string) (_ *Lineage, err error) {
	l.holdID, l.id = holdID, HashHoldID(holdID)
	defer func() {
		if err != nil {
			l.Close()
		}
	}()
	if err := l.writeConfig(lineageHoldConfig{HoldId: l.id}); err != nil {
		return nil, err
	}
	if len(l.links) == 0 { // else a spare taken attached
		if err := l.attach(); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// attach attaches the programs (in pinLinks' order). Exit and exec come
// before fork, so that no member is admitted whose exit could go unseen.
// Attached with no launcher and an empty lineage map, they admit no one.
func (l *Lineage) attach() error {
	for _, p := range []struct {
		name string
		prog *ebpf.Program
	}{{"sched_process_exit", l.progs.OnExit}, {"sched_process_exec", l.progs.OnExec}, {"sched_process_fork", l.progs.OnFork}} {
		lk, err := link.AttachTracing(link.TracingOptions{Program: p.prog})
		if err != nil {
			return fmt.Errorf("attaching to tracepoint %s: %w", p.name, err)
		}
		l.links = append(l.links, lk)
	}
	return nil
}

// LoadError is a refusal by the kernel to load the programs. Line is the
// verifier's (or the loader's) one-line reason.
type LoadError struct {
	Line string
	Err  error
}

func (e *LoadError) Error() string { return "loading the lineage BPF programs: " + e.Line }
func (e *LoadError) Unwrap() error { return e.Err }

func loadError(err error) error {
	line := err.Error()
	var ve *ebpf.VerifierError
	if errors.As(err, &ve) {
		line = ve.Error() // the cause and the verifier line that refused
	}
	for i := 0; i < len(line); i++ {
		if line[i] == '\n' {
			line = line[:i]
			break
		}
	}
	return &LoadError{Line: line, Err: err}
}

// HoldID is the hold name the lineage was loaded or opened for.
func (l *Lineage) HoldID() string { return l.holdID }

// SealMode is the seal Load compiled in; "" for a lineage opened from pins
// (its dead holder chose, and the pins do not say).
func (l *Lineage) SealMode() SealMode { return l.seal }

// FromSpare reports whether the lineage was a spare another process loaded.
func (l *Lineage) FromSpare() bool { return l.spare }

// ErrClosed is returned by a Lineage's methods after Close.
var ErrClosed = errors.New("the lineage BPF objects are closed")

func (l *Lineage) readConfig() (lineageHoldConfig, error) {
	var c lineageHoldConfig
	if l.maps.Config == nil {
		return c, ErrClosed
	}
	if err := l.maps.Config.Lookup(uint32(0), &c); err != nil {
		return c, fmt.Errorf("reading the lineage config map: %w", err)
	}
	return c, nil
}

func (l *Lineage) writeConfig(c lineageHoldConfig) error {
	if l.maps.Config == nil {
		return ErrClosed
	}
	if err := l.maps.Config.Put(uint32(0), &c); err != nil {
		return fmt.Errorf("writing the lineage config map: %w", err)
	}
	return nil
}

// SetLauncher names the process whose children are admitted while it is
// set: the payload, forked by the hold. start is its start time in ticks
// (proc.Ident.Start), so that a recycled pid is never a launcher. A zero
// pid admits no more. The launcher itself is never a member. Root names the
// last child admitted.
func (l *Lineage) SetLauncher(pid int, start uint64) error {
	c, err := l.readConfig()
	if err != nil {
		return err
	}
	c.Launcher, c.LauncherStart = uint32(pid), start
	if pid == 0 {
		c.LauncherStart = 0
	}
	return l.writeConfig(c)
}

// Seal stops the lineage from growing: from now on a member that forks is
// killed at the fork, and its child at birth under SealBirth (under
// SealFork the child is a member, for the KILL pass). It cannot be undone.
func (l *Lineage) Seal() error {
	c, err := l.readConfig()
	if err != nil {
		return err
	}
	c.Sealed = 1
	c.Launcher, c.LauncherStart = 0, 0
	return l.writeConfig(c)
}

// Sealed reports whether Seal was called (by this holder or a successor).
func (l *Lineage) Sealed() (bool, error) {
	c, err := l.readConfig()
	return c.Sealed != 0, err
}

// readState reads the programs' state. A state map pinned by an earlier
// build (a dead holder's, across an upgrade) is shorter: what it has is
// read, and its count is LiveUnknown.
func (l *Lineage) readState() (lineageHoldState, error) {
	var s lineageHoldState
	if l.maps.State == nil {
		return s, ErrClosed
	}
	size := binary.Size(s)
	buf := make([]byte, max(int(l.maps.State.ValueSize()), size))
	if err := l.maps.State.Lookup(uint32(0), buf[:l.maps.State.ValueSize()]); err != nil {
		return s, fmt.Errorf("reading the lineage state map: %w", err)
	}
	if err := binary.Read(bytes.NewReader(buf[:size]), binary.LittleEndian, &s); err != nil {
		return s, fmt.Errorf("decoding the lineage state map: %w", err)
	}
	if int(l.maps.State.ValueSize()) < size {
		s.Live = LiveUnknown
	}
	return s, nil
}

// Root reports the payload the launcher's fork admitted.
func (l *Lineage) Root() (Root, error) {
	s, err := l.readState()
	return Root{PID: int(s.Root), StartNs: s.RootStartNs, Forks: s.Roots}, err
}

// Counters reads the programs' counters.
func (l *Lineage) Counters() (Counters, error) {
	s, err := l.readState()
	return Counters{Admitted: s.Admitted, Overflow: s.Overflow, Lost: s.Lost, KilledAtBirth: s.KilledAtBirth, Live: s.Live}, err
}

// Member looks up one tgid in the lineage.
func (l *Lineage) Member(pid int) (Member, bool, error) {
	var v lineageMember
	if l.maps.Lineage == nil {
		return Member{}, false, ErrClosed
	}
	err := l.maps.Lineage.Lookup(uint32(pid), &v)
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return Member{}, false, nil
	}
	if err != nil {
		return Member{}, false, fmt.Errorf("reading the lineage map: %w", err)
	}
	return toMember(uint32(pid), v), true, nil
}

func toMember(k uint32, v lineageMember) Member {
	return Member{PID: int(k), Parent: int(v.Parent), StartNs: v.StartNs, HoldID: v.HoldId, Flags: v.Flags}
}

// Members returns every process in the lineage map now: live ones, and
// zombies whose thread group has not finished exiting. It reads the map in
// batches (bucket by bucket), so members added or removed meanwhile cannot
// make it restart or loop; each tgid appears once.
func (l *Lineage) Members() ([]Member, error) {
	const batch = 1024
	if l.maps.Lineage == nil {
		return nil, ErrClosed
	}
	keys := make([]uint32, batch)
	vals := make([]lineageMember, batch)
	seen := make(map[uint32]bool)
	var out []Member
	var cursor ebpf.MapBatchCursor
	for {
		n, err := l.maps.Lineage.BatchLookup(&cursor, keys, vals, nil)
		for i := 0; i < n; i++ {
			if !seen[keys[i]] {
				seen[keys[i]] = true
				out = append(out, toMember(keys[i], vals[i]))
			}
		}
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("reading the lineage map: %w", err)
		}
	}
}

// Close detaches the programs and frees the maps, unless they are pinned:
// pinned objects stay in the kernel (and keep tracking) until Unpin.
func (l *Lineage) Close() error {
	var errs []error
	for _, lk := range l.links {
		errs = append(errs, lk.Close())
	}
	l.links = nil
	for _, c := range []interface{ Close() error }{l.progs.OnFork, l.progs.OnExec, l.progs.OnExit,
		l.maps.Config, l.maps.State, l.maps.Lineage, l.maps.Events} {
		errs = append(errs, c.Close()) // nil-safe
	}
	l.progs, l.maps = lineagePrograms{}, lineageMaps{}
	return errors.Join(errs...)
}
