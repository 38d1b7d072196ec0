// procfs_exec_test.go checks that a walk landing inside an exec (the new
// program named, its arguments not yet copied in) never leaves the record
// an exec without its arguments.
package tracker

import (
	"slices"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/proc"
	"github.com/gpu-hold/gpu-hold/record"
)

// midExec makes the argv read empty (as inside an exec's window) until
// the returned func is called.
func midExec(t *testing.T) (done func()) {
	real := readArgv
	readArgv = func(int) []string { return nil }
	t.Cleanup(func() { readArgv = real })
	return func() { readArgv = real }
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
// loaded host the test's own walks would land in that window.
func liveCat(t *testing.T) proc.Stat {
	t.Helper()
	c := startMarked(t, []string{"cat"}, nil)
	for deadline := time.Now().Add(10 * time.Second); len(readArgv(c.pid)) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("cat (pid %d) has no argv to read after 10s", c.pid)
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
