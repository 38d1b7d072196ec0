// event.go owns the lineage event: what a backend saw happen to one process
// (birth, exec, exit, leaving its group or session), as streamed into the
// hold's record through a Sink, and the Counters of what the backend lost.
package record

import (
	"time"

	"github.com/gpu-hold/gpu-hold/internal/proc"
)

// Kind is the kind of a lineage event.
type Kind string

const (
	// Fork: a process joined the lineage (born to a member, or the payload).
	Fork Kind = "fork"
	// Exec: a member executed a new program.
	Exec Kind = "exec"
	// Exit: a member's thread group exited.
	Exit Kind = "exit"
	// Regroup: a member was seen in another process group or session than its parent's.
	Regroup Kind = "regroup"
	// KilledAtBirth: the sealed lineage killed a member at its fork.
	KilledAtBirth Kind = "killed-at-birth"
)

// Event is one thing a backend saw. Fields a backend cannot know stay zero
// and are omitted from JSON; Known says which of the optional ones it knows.
type Event struct {
	Kind Kind      `json:"kind"`
	Time time.Time `json:"time"`
	proc.Ident
	PPID int  `json:"ppid,omitempty"`
	PGID int  `json:"pgid,omitempty"`
	SID  int  `json:"sid,omitempty"`
	UID  *int `json:"uid,omitempty"`
	// Exec: program and bounded argv.
	Filename string   `json:"filename,omitempty"`
	Argv     []string `json:"argv,omitempty"`
	// Exit: exactly one of ExitCode and Signal is set when the backend knows
	// how the process ended; neither when it does not (procfs, for a process
	// it did not reap itself).
	ExitCode *int `json:"exit_code,omitempty"`
	Signal   *int `json:"signal,omitempty"`
}

// Counters are the tracker's own losses, reported in the record and in
// metrics; never silently dropped.
type Counters struct {
	LostEvents  uint64 `json:"lost_events"`  // ring buffer reservations that failed
	MapOverflow uint64 `json:"map_overflow"` // members the lineage map could not store
	Members     uint64 `json:"members"`      // processes ever admitted to the lineage
}

// Sink receives every lineage event as it is seen. It is called from the
// tracker's own goroutine; it must not block for long.
type Sink func(Event)
