// Package proc holds process identity: a pid together with its start time,
// read from /proc, and signals sent through pidfds opened only after that
// identity was checked. It is the leaf that tracker, queue and hold share.
package proc

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Ident names one process for its whole life: pids are reused, the pair
// (pid, start time) is not. Start is /proc/PID/stat field 22, in clock ticks
// since boot.
type Ident struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start"`
}

func (id Ident) String() string { return fmt.Sprintf("%d@%d", id.PID, id.Start) }

// Stat is the part of /proc/PID/stat the tracker and teardown need.
type Stat struct {
	Ident
	State byte // R, S, D, Z, T, t, X, I...
	PPID  int
	PGID  int
	SID   int
	Comm  string
	// Flags are the kernel's task flags (field 9): see Exiting.
	Flags uint32
	// Threads is the process's thread count (field 20). A process whose
	// main thread has exited shows that thread's state, Z, while the
	// others still run: it counts the live ones besides the main one.
	Threads int
	// StartStack is the address of the bottom of the program's stack
	// (field 28): a new one is drawn at every exec, so it changes where an
	// exec keeps the command name (bash running bash -c). 0 when the kernel
	// hides it from the reader or the exec has not set it up yet.
	StartStack uint64
	// Status is a zombie's wait status as waitpid would report it (field
	// 52, exit_code), read without reaping it; -1 for any other state or
	// when the kernel gives none. (A reader the kernel would not let trace
	// the zombie reads 0 here: see OwnIDs.)
	Status int
}

// Dead reports whether the process has exited: a zombie counts as dead,
// but not a process whose main thread exited while its other threads run
// (it looks like a zombie, and it is alive: it can fork, hold devices and
// ignore TERM).
func (s Stat) Dead() bool { return (s.State == 'Z' || s.State == 'X') && s.Threads <= 1 }

// pfExiting is the kernel's PF_EXITING task flag.
const pfExiting = 0x4

// Exiting reports whether the process has begun to exit (SIGKILLed, say)
// without being a zombie yet: it may still hold its files, and so its
// flocks, for a moment.
func (s Stat) Exiting() bool { return s.Flags&pfExiting != 0 }

// ErrGone means the process no longer exists (or its pid names another process).
var ErrGone = errors.New("process is gone")

// ReadStat reads /proc/PID/stat. It returns ErrGone when the pid does not exist.
func ReadStat(pid int) (Stat, error) {
	// Plain system calls, not os.Open: a walk reads thousands of these, and
	// os.File's poller set-up would double the calls for each.
	var buf [512]byte
	fd, err := syscall.Open("/proc/"+strconv.Itoa(pid)+"/stat", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, errESRCH) {
			return Stat{}, ErrGone
		}
		return Stat{}, &os.PathError{Op: "open", Path: "/proc/" + strconv.Itoa(pid) + "/stat", Err: err}
	}
	n, err := syscall.Read(fd, buf[:])
	syscall.Close(fd)
	if err != nil || n <= 0 {
		return Stat{}, ErrGone // a process that died while we read
	}
	return parseStat(pid, string(buf[:n]))
}

// parseStat parses the text of /proc/PID/stat. The command name may hold
// spaces and parentheses, so fields are counted from the last ')'.
func parseStat(pid int, s string) (Stat, error) {
	open := strings.IndexByte(s, '(')
	close := strings.LastIndexByte(s, ')')
	if open < 0 || close < open || close+2 >= len(s) {
		return Stat{}, fmt.Errorf("/proc/%d/stat is malformed", pid)
	}
	st := Stat{Comm: s[open+1 : close], Status: -1}
	st.PID = pid
	rest := s[close+2:]
	// Fields after comm start at field 3 (state); we need 3,4,5,6, 9, 20,
	// 22 and 28, and for a zombie 52.
	var field int = 3
	last := 28
	for field <= last && len(rest) > 0 {
		sp := strings.IndexByte(rest, ' ')
		var tok string
		if sp < 0 {
			tok, rest = rest, ""
		} else {
			tok, rest = rest[:sp], rest[sp+1:]
		}
		switch field {
		case 3:
			if len(tok) > 0 {
				st.State = tok[0]
			}
			if st.State == 'Z' {
				last = 52
			}
		case 4:
			st.PPID, _ = strconv.Atoi(tok)
		case 5:
			st.PGID, _ = strconv.Atoi(tok)
		case 6:
			st.SID, _ = strconv.Atoi(tok)
		case 9:
			f, _ := strconv.ParseUint(tok, 10, 32)
			st.Flags = uint32(f)
		case 20:
			st.Threads, _ = strconv.Atoi(tok)
		case 22:
			v, err := strconv.ParseUint(tok, 10, 64)
			if err != nil {
				return Stat{}, fmt.Errorf("/proc/%d/stat: bad start time %q", pid, tok)
			}
			st.Start = v
		case 28:
			st.StartStack, _ = strconv.ParseUint(tok, 10, 64)
		case 52:
			st.Status, _ = strconv.Atoi(strings.TrimSpace(tok))
		}
		field++
	}
	if field <= 22 {
		return Stat{}, fmt.Errorf("/proc/%d/stat is truncated", pid)
	}
	return st, nil
}

// Self returns the identity of the calling process.
func Self() (Ident, error) {
	st, err := ReadStat(os.Getpid())
	return st.Ident, err
}

// Alive reports whether id still names a live (non-zombie) process.
func Alive(id Ident) bool {
	_, ok := LiveStat(id)
	return ok
}

// LiveStat returns id's stat when id still names a live process.
func LiveStat(id Ident) (Stat, bool) {
	st, err := ReadStat(id.PID)
	if err != nil || st.Start != id.Start || st.Dead() {
		return Stat{}, false
	}
	return st, true
}

// UID returns the uid that owns pid (its effective uid), or -1 when the
// process cannot be read.
func UID(pid int) int {
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/"+strconv.Itoa(pid), &st); err != nil {
		return -1
	}
	return int(st.Uid)
}

// statusUIDs is the fields of pid's status "Uid:" line (real, effective,
// saved, filesystem), nil when it cannot be read.
func statusUIDs(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return nil
	}
	_, rest, ok := strings.Cut(string(b), "\nUid:")
	if !ok {
		return nil
	}
	line, _, _ := strings.Cut(rest, "\n")
	return strings.Fields(line)
}

// OwnIDs reports whether pid's real, effective and saved user and group
// ids are all this process's effective ones. That is what the kernel asks
// before it shows a reader without CAP_SYS_PTRACE some fields of another
// process's stat (a zombie's exit status among them: otherwise it shows 0).
func OwnIDs(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	want := map[string]int{"Uid:": os.Geteuid(), "Gid:": os.Getegid()}
	seen := 0
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		id, ok := want[f[0]]
		if !ok {
			continue
		}
		for _, v := range f[1:4] { // real, effective, saved
			if n, err := strconv.Atoi(v); err != nil || n != id {
				return false
			}
		}
		seen++
	}
	return seen == len(want)
}

// UserRuns reports whether any live process has uid among its real,
// effective or saved uids: whether that user could have anything left
// running, its setuid programs included.
func UserRuns(uid int) bool {
	found := false
	want := strconv.Itoa(uid)
	Walk(func(st Stat) {
		if found || st.Dead() {
			return
		}
		f := statusUIDs(st.PID)
		found = len(f) >= 3 && (f[0] == want || f[1] == want || f[2] == want)
	})
	return found
}

// ticksPerSecond is USER_HZ, the unit of /proc/PID/stat's start time.
const ticksPerSecond = 100

// BootToWall is what to add to a CLOCK_BOOTTIME instant to get wall time.
func BootToWall() time.Duration {
	var ts unix.Timespec
	now := time.Now()
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 0
	}
	return time.Duration(now.UnixNano() - ts.Nano())
}

// Started returns when id's process started, in wall time (to the tick:
// 10 ms), from its start time since boot.
func (id Ident) Started(bootToWall time.Duration) time.Time {
	return time.Unix(0, int64(id.Start)*int64(time.Second/ticksPerSecond)+int64(bootToWall))
}
