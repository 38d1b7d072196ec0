// procfs_exec.go owns what the procfs backend records of a member's
// program: the exec event, held back while the kernel is still copying the
// new program's arguments in.
package tracker

import (
	"os"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/record"
)

// readArgv reads a live process's argv (nil: none to read); a variable so
// that a test can stand in for the kernel's exec window.
var readArgv = func(pid int) []string { return proc.Cmdline(pid, record.MaxArgs, record.MaxArgLen) }

// execSeen records the program st runs, seen to start at at. A walk can
// land inside an exec after the kernel named the new program (its command
// name and exe) and before it copied the arguments in: the argv reads
// empty then. The exec is held back on m and read again at the next walk
// (keeping its first time), so the record never keeps an exec with its
// arguments missing when they were there to read. st becomes the stat the
// program was read with (see readProgram), and m's stack its.
func (t *procTracker) execSeen(m *procMember, st *proc.Stat, at time.Time) {
	argv, exe := readProgram(st)
	if st.StartStack != 0 {
		m.stack = st.StartStack
	}
	ev := record.Event{Kind: record.Exec, Time: at, Ident: st.Ident, Filename: exe, Argv: argv}
	if len(argv) == 0 {
		m.exec = &ev
		return
	}
	m.exec = nil
	t.emit(ev)
}

// statAgain reads a process's stat after its program; a variable so that
// a test's made-up stats are not checked against the real process.
var statAgain = proc.ReadStat

// programReads bounds readProgram's reads of a process that keeps exec'ing.
const programReads = 3

// readProgram reads st's argv and exe as one program's. An exec that ends
// between the two reads would pair one program's arguments with another's
// file (a vfork child shares its parent's memory, so it shows the parent's
// argv until its exec). The stat read after them tells: another name or
// stack means an exec ran meanwhile, and both are read again.
func readProgram(st *proc.Stat) (argv []string, exe string) {
	for i := 0; ; i++ {
		argv = readArgv(st.PID)
		exe, _ = os.Readlink(st.Dir() + "/exe")
		if exe == "" && len(argv) > 0 {
			exe = argv[0]
		}
		after, err := statAgain(st.PID)
		if err != nil || after.Ident != st.Ident || !execed(&procMember{stat: *st, stack: st.StartStack}, after) || i+1 == programReads {
			return argv, exe
		}
		*st = after
	}
}

// execChanged handles a walk's sighting of a known live member: a new
// program is a new exec (one held back is written first, as it was read),
// an exec held back is read again.
func (t *procTracker) execChanged(m *procMember, st *proc.Stat, now time.Time) {
	switch {
	case execed(m, *st):
		t.flushExec(m)
		t.execSeen(m, st, now)
		m.stack = st.StartStack
	case m.exec != nil:
		t.execSeen(m, st, m.exec.Time)
	}
	if st.StartStack != 0 {
		m.stack = st.StartStack
	}
}

// execed reports whether st runs another program than the member last
// seen as m: its command name changed, or its stack did. The name alone
// misses bash running bash -c, the commonest exec of a shell script; a
// stack is drawn anew at every exec. One read as 0 (hidden from this hold,
// or an exec caught before it set the stack up) compares with nothing:
// after an exec caught by its name that way, the stack read next is the
// new program's, not another exec.
func execed(m *procMember, st proc.Stat) bool {
	return m.stat.Comm != st.Comm || m.stack != 0 && st.StartStack != 0 && m.stack != st.StartStack
}

// flushExec writes the exec held back on m as it was read, for a member
// that exited or exec'd again before its arguments could be read.
func (t *procTracker) flushExec(m *procMember) {
	if m != nil && m.exec != nil {
		t.emit(*m.exec)
		m.exec = nil
	}
}

// lastExec writes the exec held back on a member alive when the tracker
// closes, its argv read once more.
func (t *procTracker) lastExec(m *procMember, st proc.Stat) {
	if m.exec != nil {
		t.execSeen(m, &st, m.exec.Time)
		t.flushExec(m)
	}
}
