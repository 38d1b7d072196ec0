// procfs_exec_test.go checks that a walk landing inside an exec (the new
// program named, its arguments not yet copied in) never leaves the record
// an exec without its arguments.
package tracker

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/record"
)

// midExec makes the argv read empty (as inside an exec's window) until
// the returned func is called.
func midExec(t *testing.T) (done func()) {
	real := readArgv
	readArgv = func(int) []string { return nil }
	t.Cleanup(func() { readArgv = real })
	return func() { readArgv = real }
}

// madeUpStats keeps the test's made-up stats from being checked against
// the real process's after its program is read (readProgram).
func madeUpStats(t *testing.T) {
	real := statAgain
	statAgain = func(int) (proc.Stat, error) { return proc.Stat{}, proc.ErrGone }
	t.Cleanup(func() { statAgain = real })
}

// execTracker is a procfs tracker whose events go to the returned list.
func execTracker() (*procTracker, *[]record.Event) {
	var evs []record.Event
	return &procTracker{
		opts:  Options{Sink: func(ev record.Event) { evs = append(evs, ev) }},
		seen:  map[proc.Ident]*procMember{},
		byPID: map[int]proc.Ident{},
	}, &evs
}

func kinds(evs []record.Event) (ks []record.Kind) {
	for _, ev := range evs {
		ks = append(ks, ev.Kind)
	}
	return ks
}

// liveCat is a marked `cat` child of the test and its stat, once its exec
// is over: cmd.Start returns when the kernel has closed the exec's
// close-on-exec files, before it has put the arguments in place, and on a
// loaded host the test's own walks would land in that window. It waits
// for cat's own argv, not any: in the Debian 6.1 guest a read once showed
// the test binary's, as if from the memory the child shared with the test
// before its exec.
func liveCat(t *testing.T) proc.Stat {
	t.Helper()
	c := startMarked(t, []string{"cat"}, nil)
	for deadline := time.Now().Add(10 * time.Second); !slices.Equal(readArgv(c.pid), []string{"cat"}); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("cat (pid %d) does not show its argv after 10s", c.pid)
		}
	}
	st, err := proc.ReadStat(c.pid)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// A member first seen mid-exec: its exec is written at the next walk, with
// its argv and the time of its first sighting.
func TestExecSeenMidwayIsReadAgain(t *testing.T) {
	st := liveCat(t)
	tr, evs := execTracker()
	done := midExec(t)
	tr.observe(st, time.Now())
	if ks := kinds(*evs); !slices.Equal(ks, []record.Kind{record.Fork}) {
		t.Fatalf("first walk, mid-exec, wrote %v: want the fork alone, the exec held back", ks)
	}
	done()
	tr.observe(st, time.Now().Add(time.Second))
	if ks := kinds(*evs); !slices.Equal(ks, []record.Kind{record.Fork, record.Exec}) {
		t.Fatalf("second walk wrote %v in all: want the fork, then the exec", ks)
	}
	ex := (*evs)[1]
	if !slices.Equal(ex.Argv, []string{"cat"}) || ex.Filename == "" {
		t.Errorf("exec written as %q %v: want cat's exe and argv", ex.Filename, ex.Argv)
	}
	if !ex.Time.Equal((*evs)[0].Time) {
		t.Errorf("exec timed %v: want its first sighting's, %v", ex.Time, (*evs)[0].Time)
	}
	tr.observe(st, time.Now().Add(2*time.Second))
	if n := len(*evs); n != 2 {
		t.Errorf("a third walk wrote %v: the exec was written once already", kinds(*evs))
	}
}

// A member that exits, exec's again or is alive at the close before its
// argv could be read still has its exec written, before what follows.
func TestExecHeldBackIsNeverLost(t *testing.T) {
	for _, c := range []struct {
		name string
		then func(tr *procTracker, st proc.Stat)
		want []record.Kind
	}{
		{"exit", func(tr *procTracker, st proc.Stat) { tr.exited(st.Ident, tr.seen[st.Ident], time.Now(), nil) },
			[]record.Kind{record.Fork, record.Exec, record.Exit}},
		{"exec again", func(tr *procTracker, st proc.Stat) {
			st.Comm = "other"
			tr.observe(st, time.Now())
		}, []record.Kind{record.Fork, record.Exec, record.Exec}},
		{"close", func(tr *procTracker, st proc.Stat) { tr.settleExits() },
			[]record.Kind{record.Fork, record.Exec}},
	} {
		t.Run(c.name, func(t *testing.T) {
			madeUpStats(t)
			st := liveCat(t)
			tr, evs := execTracker()
			done := midExec(t)
			tr.observe(st, time.Now())
			done()
			c.then(tr, st)
			if ks := kinds(*evs); !slices.Equal(ks, c.want) {
				t.Errorf("wrote %v, want %v", ks, c.want)
			}
		})
	}
}

// A member that execs a program of the same name (bash running bash -c,
// the commonest exec of a shell script) has that exec recorded: its
// command name stays, its stack does not.
func TestExecSameNameIsSeen(t *testing.T) {
	c := startMarked(t, []string{"bash", "-c", `read x; exec bash -c "read y; true"`}, nil)
	argvHas := func(s string) bool { return slices.Contains(readArgv(c.pid), s) }
	waitFor(t, "bash's first argv", func() bool { return argvHas(`read x; exec bash -c "read y; true"`) })
	first, err := proc.ReadStat(c.pid)
	if err != nil {
		t.Fatal(err)
	}
	tr, evs := execTracker()
	tr.observe(first, time.Now())
	if _, err := c.stdin.Write([]byte("x\n")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the exec of bash -c", func() bool { return argvHas("read y; true") })
	second, err := proc.ReadStat(c.pid)
	if err != nil {
		t.Fatal(err)
	}
	if second.Comm != first.Comm {
		t.Fatalf("test shape: the command name changed (%q, %q)", first.Comm, second.Comm)
	}
	tr.observe(second, time.Now())
	tr.observe(second, time.Now())
	if ks := kinds(*evs); !slices.Equal(ks, []record.Kind{record.Fork, record.Exec, record.Exec}) {
		t.Fatalf("wrote %v: want the fork, the first program, then the exec once", ks)
	}
	if argv := (*evs)[2].Argv; !slices.Contains(argv, "read y; true") {
		t.Errorf("the exec's argv is %q: want the new program's", argv)
	}
}

// A stack read as 0 (inside an exec, before the kernel set it up) is no
// exec of its own, and does not hide the one that follows.
func TestExecStackUnsetIsNoExec(t *testing.T) {
	madeUpStats(t)
	st := liveCat(t)
	for _, c := range []struct {
		name  string
		steps []proc.Stat
		want  int // execs after the first sighting's
	}{
		{"unset, then a new stack", []proc.Stat{withStack(st, st.Comm, 0), withStack(st, st.Comm, st.StartStack+4096)}, 1},
		{"new name with the stack unset, then its stack", []proc.Stat{withStack(st, "other", 0), withStack(st, "other", st.StartStack+4096)}, 1},
		{"unset, then the same stack", []proc.Stat{withStack(st, st.Comm, 0), st}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr, evs := execTracker()
			tr.observe(st, time.Now())
			for _, s := range c.steps {
				tr.observe(s, time.Now())
			}
			if n := len(*evs) - 2; n != c.want {
				t.Errorf("wrote %v: want %d exec(s) after the first sighting", kinds(*evs), c.want)
			}
		})
	}
}

// An exec that ends between the reads of a member's argv and of its exe
// (its argv still the old program's, its exe already the new one) is read
// again: the record never pairs one program's arguments with another's file.
func TestExecBetweenReadsIsReadAgain(t *testing.T) {
	c := startMarked(t, []string{"bash", "-c", "read x; exec cat"}, nil)
	waitFor(t, "bash's argv", func() bool { return slices.Contains(readArgv(c.pid), "read x; exec cat") })
	first, err := proc.ReadStat(c.pid)
	if err != nil {
		t.Fatal(err)
	}
	real := readArgv
	t.Cleanup(func() { readArgv = real })
	readArgv = func(pid int) []string {
		argv := real(pid)
		readArgv = real
		if _, err := c.stdin.Write([]byte("x\n")); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the exec of cat", func() bool { return slices.Equal(real(pid), []string{"cat"}) })
		return argv // bash's, read before the exec
	}
	tr, evs := execTracker()
	tr.observe(first, time.Now())
	if ks := kinds(*evs); !slices.Equal(ks, []record.Kind{record.Fork, record.Exec}) {
		t.Fatalf("wrote %v: want the fork and one exec", ks)
	}
	if ex := (*evs)[1]; filepath.Base(ex.Filename) != "cat" || !slices.Equal(ex.Argv, []string{"cat"}) {
		t.Fatalf("exec written as %q %q: want cat's file with cat's argv", ex.Filename, ex.Argv)
	}
	now, err := proc.ReadStat(c.pid)
	if err != nil {
		t.Fatal(err)
	}
	tr.observe(now, time.Now())
	if n := len(*evs); n != 2 {
		t.Errorf("the next walk wrote %v: cat's exec was written already", kinds(*evs))
	}
}

func withStack(st proc.Stat, comm string, stack uint64) proc.Stat {
	st.Comm, st.StartStack = comm, stack
	return st
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after 10s", what)
		}
	}
}
