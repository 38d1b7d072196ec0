// record_assemble.go owns turning a record's lines into processes: each
// member's parent, exec chain, exit, fate (written, or inferred from the
// teardown's times) and flags (left-group, left-session, reparented), and
// the fields the backend could not know.
package record

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/proc"
)

// Process is one lineage member as the record tells it.
type Process struct {
	proc.Ident
	// Parent is the member that forked it; nil for the payload's root and
	// for a member whose parent is not in the record.
	Parent *proc.Ident `json:"parent,omitempty"`
	// PPID, PGID and SID are the first values seen (at birth, unless
	// "birth" is in Unknown); the Later ones list other values seen after.
	PPID int `json:"ppid,omitempty"`
	PGID int `json:"pgid,omitempty"`
	// SID 0 is a real session when "sid" is not in Unknown: one whose
	// leader is outside this pid namespace, as for the children of an
	// init that never called setsid.
	SID        int        `json:"sid"`
	LaterPPIDs []int      `json:"later_ppids,omitempty"`
	LaterPGIDs []int      `json:"later_pgids,omitempty"`
	LaterSIDs  []int      `json:"later_sids,omitempty"`
	UID        *int       `json:"uid,omitempty"`
	Execs      []ExecStep `json:"execs,omitempty"`
	// FirstSeen is its fork, or when the backend first saw it.
	FirstSeen time.Time `json:"first_seen,omitzero"`
	// ExitTime is zero when no exit was seen.
	ExitTime time.Time `json:"exit_time,omitzero"`
	ExitCode *int      `json:"exit_code,omitempty"`
	Signal   *int      `json:"signal,omitempty"`
	// ExitStatus reads "exit 3", "signal 9 (SIGKILL)", or "unknown" when
	// the exit was seen but not its status; empty when no exit was seen.
	ExitStatus string    `json:"exit_status,omitempty"`
	Fate       Fate      `json:"fate"`
	FateAt     time.Time `json:"fate_at,omitzero"`
	// FateInferred says no fate line was written: the reader inferred it
	// from the exit time and the teardown's start.
	FateInferred bool     `json:"fate_inferred,omitempty"`
	Flags        []string `json:"flags,omitempty"`
	// Unknown names what the backend could not tell about it: "birth" (no
	// fork seen: first_seen and ppid are from its discovery), "uid",
	// "pgid", "sid", "exit_status".
	Unknown []string `json:"backend_unknown,omitempty"`
}

// ExecStep is one program a member executed.
type ExecStep struct {
	Time          time.Time `json:"time,omitzero"`
	Filename      string    `json:"filename,omitempty"`
	Argv          []string  `json:"argv,omitempty"`
	ArgvTruncated bool      `json:"argv_truncated,omitempty"`
}

// HasFlag reports whether p carries flag f.
func (p *Process) HasFlag(f string) bool { return slices.Contains(p.Flags, f) }

// Command is the member's last program as a command line: its argv, else
// its filename; "" when it never executed anything (a fork of its parent).
func (p *Process) Command() string {
	if len(p.Execs) == 0 {
		return ""
	}
	e := p.Execs[len(p.Execs)-1]
	if len(e.Argv) > 0 {
		s := strings.Join(e.Argv, " ")
		if e.ArgvTruncated {
			s += " …"
		}
		return s
	}
	return e.Filename
}

// End is when it ended as far as the record knows: its exit, else the
// instant its fate was written for a fate that means it is gone; zero
// otherwise.
func (p *Process) End() time.Time {
	if !p.ExitTime.IsZero() {
		return p.ExitTime
	}
	switch p.Fate {
	case FateTerm, FateKill, FateKilledAtBirth, FateExited:
		return p.FateAt
	}
	return time.Time{}
}

// pstate is a member while the lines are read.
type pstate struct {
	p             Process
	sawFork       bool
	sawExit       bool
	killedAtBirth bool
	birthAt       time.Time
	fateWritten   bool
	reaped        bool
	// Group and session ids seen, from the fork and from later events:
	// the payload's root is born in the hold's group and only then moves
	// to its own, so its fork's ids do not count for left-group.
	forkPGID, forkSID int
	pgids, sids       []int
	// sidKnown: a fork or regroup was seen, which always carry the
	// session, so a SID of 0 is the real one (see Process.SID).
	sidKnown bool
}

type builder struct {
	rec    *Record
	procs  map[proc.Ident]*pstate
	order  []proc.Ident
	inReap bool
}

func newBuilder(path string) *builder {
	return &builder{rec: &Record{Path: path}, procs: map[proc.Ident]*pstate{}}
}

func (b *builder) seen(t time.Time) {
	if t.After(b.rec.Last) {
		b.rec.Last = t
	}
}

func (b *builder) get(id proc.Ident, t time.Time) *pstate {
	ps := b.procs[id]
	if ps == nil {
		ps = &pstate{p: Process{Ident: id, FirstSeen: t}}
		b.procs[id] = ps
		b.order = append(b.order, id)
	} else if !t.IsZero() && (ps.p.FirstSeen.IsZero() || t.Before(ps.p.FirstSeen)) && !ps.sawFork {
		ps.p.FirstSeen = t
	}
	return ps
}

func (b *builder) hold(h HoldInfo) {
	b.rec.Hold = h
	for _, t := range []time.Time{h.Times.Queued, h.Times.Granted, h.Times.PayloadStart, h.Times.TeardownStart, h.Times.KillStart, h.Times.TeardownEnd, h.Times.Released} {
		b.seen(t)
	}
}

// observe notes the ids an event carries.
func observe(p *Process, ev Event) {
	note := func(first *int, later *[]int, v int) {
		switch {
		case v == 0:
		case *first == 0:
			*first = v
		case v != *first && !slices.Contains(*later, v):
			*later = append(*later, v)
		}
	}
	note(&p.PPID, &p.LaterPPIDs, ev.PPID)
	note(&p.PGID, &p.LaterPGIDs, ev.PGID)
	note(&p.SID, &p.LaterSIDs, ev.SID)
	if p.UID == nil && ev.UID != nil {
		u := *ev.UID
		p.UID = &u
	}
}

func (b *builder) event(ev Event, argvCut bool) {
	b.seen(ev.Time)
	ps := b.get(ev.Ident, ev.Time)
	p := &ps.p
	switch ev.Kind {
	case Fork:
		if !ps.sawFork {
			ps.sawFork = true
			if !ev.Time.IsZero() {
				p.FirstSeen = ev.Time
			}
			// The fork's ids are the birth ones: put them first.
			if ev.PPID != 0 && p.PPID != ev.PPID {
				p.LaterPPIDs = prepend(p.LaterPPIDs, p.PPID, ev.PPID)
				p.PPID = ev.PPID
			}
			if ev.PGID != 0 && p.PGID != ev.PGID {
				p.LaterPGIDs = prepend(p.LaterPGIDs, p.PGID, ev.PGID)
				p.PGID = ev.PGID
			}
			if ev.SID != 0 && p.SID != ev.SID {
				p.LaterSIDs = prepend(p.LaterSIDs, p.SID, ev.SID)
				p.SID = ev.SID
			}
		}
	case Exec:
		p.Execs = append(p.Execs, ExecStep{Time: ev.Time, Filename: ev.Filename, Argv: ev.Argv, ArgvTruncated: argvCut})
	case Exit:
		// A process may be reported gone twice (the backend, and the hold
		// for its own child with the status it reaped): the first time
		// counts, the status comes from whichever knows it.
		if !ps.sawExit || (!ev.Time.IsZero() && ev.Time.Before(p.ExitTime)) {
			p.ExitTime = ev.Time
		}
		ps.sawExit = true
		if p.ExitCode == nil && p.Signal == nil {
			p.ExitCode, p.Signal = ev.ExitCode, ev.Signal
		}
	case KilledAtBirth:
		ps.killedAtBirth = true
		ps.birthAt = ev.Time
	}
	observe(p, ev)
	if ev.Kind == Fork || ev.Kind == Regroup {
		ps.sidKnown = true
	}
	if ev.Kind == Fork {
		ps.forkPGID, ps.forkSID = ev.PGID, ev.SID
	} else {
		ps.pgids = addID(ps.pgids, ev.PGID)
		ps.sids = addID(ps.sids, ev.SID)
	}
}

func addID(ids []int, v int) []int {
	if v == 0 || slices.Contains(ids, v) {
		return ids
	}
	return append(ids, v)
}

// prepend makes old (when set) a later value, since v came first.
func prepend(later []int, old, v int) []int {
	later = slices.DeleteFunc(later, func(x int) bool { return x == v })
	if old != 0 && !slices.Contains(later, old) {
		later = append([]int{old}, later...)
	}
	return later
}

func (b *builder) fate(id proc.Ident, f Fate, at time.Time) {
	b.seen(at)
	ps := b.get(id, at)
	ps.p.Fate, ps.p.FateAt, ps.fateWritten = f, at, true
	ps.reaped = b.inReap
}

func (b *builder) reap(r ReapInfo) {
	b.seen(r.Started)
	b.seen(r.Ended)
	b.inReap = true
	for i := range b.rec.Reaps {
		if b.rec.Reaps[i].By == r.By {
			b.rec.Reaps[i] = r
			return
		}
	}
	b.rec.Reaps = append(b.rec.Reaps, r)
}

func (b *builder) end(at time.Time, by *proc.Ident) {
	if by == nil {
		b.rec.Ended, b.rec.EndedAt = true, at
	}
}

// finish resolves parents, fates and flags, and sorts.
func (b *builder) finish() {
	b.linkParents()
	pl := b.findPayload()
	for _, id := range b.order {
		ps := b.procs[id]
		if ps.p.ExitTime.IsZero() && ps.sawExit {
			ps.p.ExitTime = ps.p.FateAt
		}
		setExitStatus(ps)
		if !ps.fateWritten {
			b.inferFate(ps, pl.root)
		}
		ps.p.Flags = b.flags(ps, pl)
		ps.p.Unknown = unknowns(ps)
	}
	b.sortProcesses()
}

// linkParents gives each member its parent: the member with the birth ppid
// that started last at or before the child (pids are reused; start times
// order births).
func (b *builder) linkParents() {
	byPID := map[int][]*pstate{}
	for _, id := range b.order {
		ps := b.procs[id]
		byPID[id.PID] = append(byPID[id.PID], ps)
	}
	for _, id := range b.order {
		ps := b.procs[id]
		var best *pstate
		for _, c := range byPID[ps.p.PPID] {
			if c == ps || c.p.Start > ps.p.Start {
				continue
			}
			if best == nil || c.p.Start > best.p.Start {
				best = c
			}
		}
		if best != nil {
			pid := best.p.Ident
			ps.p.Parent = &pid
		}
	}
}

// payload is the payload's root, group and session, which the left-group
// and left-session flags compare to.
type payload struct {
	root     *pstate
	pgid     int
	sid      int
	sidKnown bool
}

// findPayload finds the payload's group and session: the header's, else its
// root's (the header's payload, else the earliest member with no parent).
func (b *builder) findPayload() payload {
	rec := b.rec
	pgid := rec.Hold.PGID
	sid, sidKnown := 0, rec.Hold.SID != nil
	if sidKnown {
		sid = *rec.Hold.SID
	}
	var root *pstate
	if rec.Hold.Payload != nil {
		root = b.procs[*rec.Hold.Payload]
	}
	if root == nil {
		for _, id := range b.order {
			if ps := b.procs[id]; ps.p.Parent == nil && (root == nil || ps.p.Start < root.p.Start) {
				root = ps
			}
		}
	}
	if root != nil {
		if pgid == 0 {
			pgid = root.p.PGID
		}
		if !sidKnown && root.sidKnown {
			sid, sidKnown = root.p.SID, true
		}
	}
	return payload{root: root, pgid: pgid, sid: sid, sidKnown: sidKnown}
}

// setExitStatus words ps's exit status, when its exit was seen.
func setExitStatus(ps *pstate) {
	p := &ps.p
	switch {
	case !ps.sawExit:
	case p.ExitCode != nil:
		p.ExitStatus = fmt.Sprintf("exit %d", *p.ExitCode)
	case p.Signal != nil:
		p.ExitStatus = SignalString(*p.Signal)
	default:
		p.ExitStatus = "unknown"
	}
}

// inferFate gives ps, whose fate was not written, the fate its exit time
// tells against the teardown's times.
func (b *builder) inferFate(ps *pstate, root *pstate) {
	rec := b.rec
	td, kill := rec.Hold.Times.TeardownStart, rec.Hold.Times.KillStart
	p := &ps.p
	p.FateInferred = true
	switch {
	case ps.killedAtBirth:
		p.Fate, p.FateAt = FateKilledAtBirth, ps.birthAt
	case !ps.sawExit:
		p.Fate = FateUnknown
	case td.IsZero() || p.ExitTime.Before(td):
		p.Fate = FateExited
	case ps == root && (rec.Hold.Cause == CauseExited || rec.Hold.Cause == CauseSignal):
		// The hold ended because the root ended on its own; its
		// exit may be reported only after the teardown began.
		p.Fate = FateExited
	case !kill.IsZero() && !p.ExitTime.Before(kill) && p.Signal != nil && *p.Signal == int(syscall.SIGKILL):
		p.Fate = FateKill
	default:
		p.Fate = FateTerm
	}
	if p.FateAt.IsZero() && ps.sawExit {
		p.FateAt = p.ExitTime
	}
}

// flags are ps's flags: left-group, left-session (against pl), reparented,
// reaped.
func (b *builder) flags(ps *pstate, pl payload) []string {
	p := &ps.p
	var flags []string
	pgids, sids := ps.pgids, ps.sids
	if ps != pl.root {
		pgids, sids = addID(pgids, ps.forkPGID), addID(sids, ps.forkSID)
	}
	differs := func(ids []int, ref int) bool {
		return slices.ContainsFunc(ids, func(v int) bool { return v != ref })
	}
	if pl.pgid != 0 && differs(pgids, pl.pgid) {
		flags = append(flags, FlagLeftGroup)
	}
	if pl.sidKnown && differs(sids, pl.sid) {
		flags = append(flags, FlagLeftSession)
	}
	if len(p.LaterPPIDs) > 0 || b.orphaned(ps) {
		flags = append(flags, FlagReparented)
	}
	if ps.reaped {
		flags = append(flags, FlagReaped)
	}
	return flags
}

// unknowns names what the backend could not tell about ps.
func unknowns(ps *pstate) []string {
	p := &ps.p
	var unk []string
	if !ps.sawFork {
		unk = append(unk, "birth")
	}
	if p.UID == nil {
		unk = append(unk, "uid")
	}
	if p.PGID == 0 {
		unk = append(unk, "pgid")
	}
	if p.SID == 0 && !ps.sidKnown {
		unk = append(unk, "sid")
	}
	if p.ExitStatus == "unknown" {
		unk = append(unk, "exit_status")
	}
	return unk
}

// sortProcesses lists the processes by start time, then first seen, then
// pid, and indexes them and the ones still alive.
func (b *builder) sortProcesses() {
	rec := b.rec
	rec.Processes = make([]Process, 0, len(b.order))
	for _, id := range b.order {
		rec.Processes = append(rec.Processes, b.procs[id].p)
	}
	slices.SortStableFunc(rec.Processes, func(x, y Process) int {
		return cmp.Or(cmp.Compare(x.Start, y.Start), x.FirstSeen.Compare(y.FirstSeen), cmp.Compare(x.PID, y.PID))
	})
	rec.byID = make(map[proc.Ident]int, len(rec.Processes))
	rec.Live = []proc.Ident{}
	for i, p := range rec.Processes {
		rec.byID[p.Ident] = i
		if !b.procs[p.Ident].sawExit {
			rec.Live = append(rec.Live, p.Ident)
		}
	}
}

// orphaned reports whether ps's parent (in the record) exited before ps
// did, which reparents it whether or not a backend saw the new ppid.
func (b *builder) orphaned(ps *pstate) bool {
	if ps.p.Parent == nil {
		return false
	}
	par := b.procs[*ps.p.Parent]
	if par == nil || !par.sawExit || par.p.ExitTime.IsZero() {
		return false
	}
	if !ps.sawExit {
		return true
	}
	return par.p.ExitTime.Before(ps.p.ExitTime)
}

// SignalString names signal n: "signal 9 (SIGKILL)".
func SignalString(n int) string {
	if name := unix.SignalName(syscall.Signal(n)); name != "" {
		return fmt.Sprintf("signal %d (%s)", n, name)
	}
	return fmt.Sprintf("signal %d", n)
}
