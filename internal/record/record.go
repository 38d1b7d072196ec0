// Package record is a hold's lineage record: what its payload spawned and
// how each process ended, streamed as JSON lines while the hold runs, read
// back, pruned, and rendered as a tree or a timeline. It knows nothing of
// how the lineage was tracked, so the tracker, the hold and `show` share it.
// record.go owns the lineage record's format: the hold's header (HoldInfo),
// the fates and causes it names, the reap section a successor appends, the
// JSON lines they are written as, and where records live. docs/RECORD.md
// documents the same format for people.
package record

import (
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/proc"
)

// RecordVersion is the format version this package writes and the newest
// it reads.
const RecordVersion = 1

// Bounds on what one line may carry, so a hostile payload cannot bloat the
// record: argv is cut to MaxArgs arguments of MaxArgLen bytes each, and
// filenames to MaxFilenameLen bytes. A cut argv is marked argv_truncated.
const (
	MaxArgs        = 64
	MaxArgLen      = 512
	MaxFilenameLen = 4096
	// MaxRecordEvents is how many event lines one record holds; the events
	// after it are counted in HoldInfo.DroppedEvents instead of written.
	MaxRecordEvents = 1 << 18
	// maxLineLen is the longest line the reader accepts.
	maxLineLen = 1 << 20
)

// The reader's bounds on a whole record, which is anyone's file to plant:
// no hold writes more lines (events, a few fates per member, a header per
// phase) or names more processes (one per fork event, and the members its
// walks found with no event). Variables for the tests only.
var (
	maxRecordLines     = 8 * MaxRecordEvents
	maxRecordProcesses = 2 * MaxRecordEvents
)

// Fate says how a process of the lineage ended.
type Fate string

const (
	// FateExited: it exited on its own before the teardown began.
	FateExited Fate = "exited"
	// FateTerm: it ended during the teardown without needing KILL.
	FateTerm Fate = "term"
	// FateKill: it needed KILL.
	FateKill Fate = "kill"
	// FateKilledAtBirth: the sealed lineage killed it at its fork.
	FateKilledAtBirth Fate = "killed-at-birth"
	// FateSurvivor: it was still alive when the hold gave up on it.
	FateSurvivor Fate = "survivor"
	// FateUnknown is never written: the reader gives it to a process whose
	// exit was not seen and whose fate was not written (the record stops
	// while it lives, or its exit event was lost).
	FateUnknown Fate = "unknown"
)

func (f Fate) valid() bool {
	switch f {
	case FateExited, FateTerm, FateKill, FateKilledAtBirth, FateSurvivor:
		return true
	}
	return false
}

// Flags a reader sets on a process.
const (
	FlagLeftGroup   = "left-group"   // seen in another process group than the payload's
	FlagLeftSession = "left-session" // seen in another session than the payload's
	FlagReparented  = "reparented"   // its parent changed, or its parent ended before it
	FlagReaped      = "reaped"       // its fate was written by a successor that reaped it
)

// HoldInfo is the record's header: who held what, when, and how it ended.
// The writer streams a full copy of it on every update; the last one wins.
type HoldInfo struct {
	ID       string     `json:"id"`
	Resource string     `json:"resource"`
	Label    string     `json:"label,omitempty"`
	Ticket   uint64     `json:"ticket,omitempty"` // the ticket's sequence number
	Holder   proc.Ident `json:"holder"`           // the gpu-hold process
	UID      int        `json:"uid"`
	Host     string     `json:"host,omitempty"`
	Cmd      []string   `json:"cmd,omitempty"` // the payload command line
	Backend  string     `json:"backend,omitempty"`
	// Seal is how the tracker's seal stopped forks in the KILL pass:
	// "birth", "fork" or "passes" (docs/RECORD.md).
	Seal string `json:"seal,omitempty"`
	// BackendNote says why the backend was chosen (the fallback notice).
	BackendNote string `json:"backend_note,omitempty"`
	// Payload is the payload's root process, once started; PGID and SID
	// are its group and session, which left-group/left-session compare to
	// (SID may be 0: a session whose leader is outside this pid namespace;
	// nil when unknown).
	Payload *proc.Ident `json:"payload,omitempty"`
	PGID    int         `json:"pgid,omitempty"`
	SID     *int        `json:"sid,omitempty"`
	Cgroup  string      `json:"cgroup,omitempty"`
	Times   HoldTimes   `json:"times"`
	// ExitCode is gpu-hold's own exit status; Cause why the hold ended;
	// Signal the signal behind it when there was one (the payload's
	// killing signal, or the one the hold got).
	ExitCode *int     `json:"exit_code,omitempty"`
	Cause    Cause    `json:"cause,omitempty"`
	Signal   int      `json:"signal,omitempty"`
	Error    string   `json:"error,omitempty"`
	Counters Counters `json:"counters"`
	// Usage is what the gpu-hold process itself (not its payload) used, up
	// to the record's close.
	Usage *Usage `json:"usage,omitempty"`
	// DroppedEvents counts events past MaxRecordEvents, or lost to write
	// errors; the writer sets it.
	DroppedEvents uint64       `json:"dropped_events,omitempty"`
	Survivors     []proc.Ident `json:"survivors,omitempty"`
	// DeviceHolders are the processes outside the lineage that still held
	// the device after teardown, as the hold describes them (opaque here).
	DeviceHolders []any `json:"device_holders,omitempty"`
	// Devices are the pool devices the hold was given and how the others
	// were kept from it, as the hold describes them (opaque here).
	Devices any `json:"devices,omitempty"`
	// Reaped lists the dead holders' lineages this hold ended before its
	// own payload started.
	Reaped []ReapedHold `json:"reaped,omitempty"`
	// Lease is the fleet queue's account of the token (etcd backend only).
	Lease *LeaseInfo `json:"lease,omitempty"`
}

// Usage is a process's own CPU time and peak memory (getrusage
// RUSAGE_SELF: all its threads, none of its children).
type Usage struct {
	UserMS   float64 `json:"user_ms"`
	SysMS    float64 `json:"sys_ms"`
	MaxRSSKB int64   `json:"max_rss_kb"`
}

// SelfUsage is the calling process's own usage so far (nil if unreadable).
func SelfUsage() *Usage {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return nil
	}
	ms := func(tv unix.Timeval) float64 { return float64(tv.Sec)*1e3 + float64(tv.Usec)/1e3 }
	return &Usage{UserMS: ms(ru.Utime), SysMS: ms(ru.Stime), MaxRSSKB: ru.Maxrss}
}

// HoldTimes are the instants of a hold's life. Zero ones are omitted.
type HoldTimes struct {
	Queued        time.Time `json:"queued,omitzero"`
	Granted       time.Time `json:"granted,omitzero"`
	PayloadStart  time.Time `json:"payload_start,omitzero"`
	Deadline      time.Time `json:"deadline,omitzero"`
	TeardownStart time.Time `json:"teardown_start,omitzero"` // the TERM pass
	KillStart     time.Time `json:"kill_start,omitzero"`     // the seal and first KILL pass
	TeardownEnd   time.Time `json:"teardown_end,omitzero"`
	Released      time.Time `json:"released,omitzero"`
}

// ReapedHold is a dead holder's lineage that this hold ended (written in
// the successor's own record; the dead holder's record gets a ReapInfo).
type ReapedHold struct {
	HoldID    string       `json:"hold_id"`
	Holder    proc.Ident   `json:"holder"`
	Record    string       `json:"record,omitempty"`
	At        time.Time    `json:"at,omitzero"`
	Ended     int          `json:"ended"`
	Survivors []proc.Ident `json:"survivors,omitempty"`
	Error     string       `json:"error,omitempty"`
	// Blocked says why the lineage could not be ended with the authority
	// the reaper may use (it was then not marked reaped); Denied are its
	// members the kernel refused to let the reaper signal.
	Blocked string       `json:"blocked,omitempty"`
	Denied  []proc.Ident `json:"denied,omitempty"`
}

// ReapInfo is the section a successor appends to a dead holder's record
// when it ends that holder's lineage. The fate lines after it are the
// reaper's. Writing it again with the same By updates it.
type ReapInfo struct {
	By      proc.Ident `json:"by"`                // the reaping process
	Via     string     `json:"via,omitempty"`     // "hold" (a successor) or "reap" (gpu-hold reap)
	HoldID  string     `json:"hold_id,omitempty"` // the reaper's hold, when it is one
	UID     int        `json:"uid"`
	Host    string     `json:"host,omitempty"`
	Source  string     `json:"source,omitempty"` // how the lineage was found: "bpf-pin", "record"
	Started time.Time  `json:"started,omitzero"`
	Ended   time.Time  `json:"ended,omitzero"`
	// Candidates is how many identities were looked at; Signalled how
	// many were still alive and got a signal.
	Candidates int          `json:"candidates"`
	Signalled  int          `json:"signalled"`
	Survivors  []proc.Ident `json:"survivors,omitempty"`
	Error      string       `json:"error,omitempty"`
	// TornTail is the length of a partial last line the dead holder left,
	// which the appender cut off before writing; the writer sets it.
	TornTail int `json:"torn_tail_bytes,omitempty"`
}

// RecordPath is where a hold's record goes by default: the records
// directory of the resource's directory, named by hold id.
func RecordPath(resourceDir, holdID string) string {
	return filepath.Join(resourceDir, "records", strings.ReplaceAll(holdID, "/", "_")+".jsonl")
}

// Line types of the JSON lines file.
const (
	lineHold  = "hold"
	lineEvent = "event"
	lineFate  = "fate"
	lineReap  = "reap"
	lineEnd   = "end"
)

// lineHead is what every line starts with; v is set on hold lines.
type lineHead struct {
	V    int    `json:"v,omitempty"`
	Type string `json:"type"`
}

type holdLine struct {
	lineHead
	Hold HoldInfo `json:"hold"`
}

type eventLine struct {
	Type string `json:"type"`
	Event
	ArgvTruncated bool `json:"argv_truncated,omitempty"`
}

type fateLine struct {
	Type string `json:"type"`
	proc.Ident
	Fate Fate      `json:"fate"`
	At   time.Time `json:"at,omitzero"`
}

type reapLine struct {
	Type string   `json:"type"`
	Reap ReapInfo `json:"reap"`
}

type endLine struct {
	Type string      `json:"type"`
	At   time.Time   `json:"at,omitzero"`
	By   *proc.Ident `json:"by,omitempty"` // set when a reaper closes its section
}
