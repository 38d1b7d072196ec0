// audit.go owns the guard's audit log: one JSON line per intruder seen
// and per action on it (TERM, KILL, its exit, an end refused), appended
// to a file the admin names, opened never through a symlink and never
// when it is not a regular file.
package guard

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// auditEntry is one line of the audit log.
type auditEntry struct {
	Time     time.Time `json:"time"`
	Action   string    `json:"action"` // seen, term, kill, exited, refused
	Resource string    `json:"resource"`
	Node     string    `json:"node"`
	PID      int       `json:"pid"`
	Start    uint64    `json:"start"` // start time since boot, in clock ticks: with pid, the identity
	UID      int       `json:"uid"`
	User     string    `json:"user,omitempty"`
	Command  string    `json:"command"`
	Exe      string    `json:"exe,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	Proc     intruder  `json:"-"`
}

type audit struct {
	mu sync.Mutex
	f  *os.File
}

// openAudit opens path for appending (created 0640 when missing).
func openAudit(path string) (*audit, error) {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_APPEND|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0o640)
	if err != nil {
		return nil, fmt.Errorf("cannot open the audit log %s: %v (it must be a regular file, not a symlink, in a directory the guard may write)", path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, fmt.Errorf("the audit log %s is not a regular file: remove it", path)
	}
	return &audit{f: os.NewFile(uintptr(fd), path)}, nil
}

// record appends e to the audit log, when there is one.
func (g *Guard) record(e auditEntry) {
	if g.audit == nil {
		return
	}
	p := e.Proc
	e.Time = time.Now()
	e.PID, e.Start, e.UID, e.User, e.Command, e.Exe = p.PID, p.Start, p.UID, p.User, p.Command, p.Exe
	b, _ := json.Marshal(e)
	g.audit.mu.Lock()
	defer g.audit.mu.Unlock()
	if _, err := g.audit.f.Write(append(b, '\n')); err != nil {
		g.o.Log.Error().Err(err).Str("audit", g.audit.f.Name()).Msg("cannot append to the audit log: fix the disk or the file, the guard goes on")
	}
}

func (a *audit) close() { a.f.Close() }
