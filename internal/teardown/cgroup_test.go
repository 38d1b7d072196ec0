// cgroup_test.go checks that a process that enters the payload's cgroup
// after a pass has looked at /proc is in that pass's targets: it gets its
// TERM, not only the cgroup's KILL after the grace.
package teardown

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/gpu-hold/gpu-hold/internal/cgroup"
	marks "github.com/gpu-hold/gpu-hold/internal/mark"
	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/record"
	"github.com/gpu-hold/gpu-hold/internal/testenv"
)

// movingTracker has no members and says they come from the kernel (as
// eBPF's do), so that a pass looks at the cgroup's members only; at its
// first look (after the pass's look at /proc) it moves a process into the
// cgroup.
type movingTracker struct {
	fakeTracker
	t     *testing.T
	cg    *cgroup.Cgroup
	pid   int
	moved bool
}

func (m *movingTracker) Snapshot() (*proc.Snapshot, bool) { return proc.SnapshotOf(nil), true }

func (m *movingTracker) LiveIn(*proc.Snapshot) []proc.Stat {
	if !m.moved {
		m.moved = true
		if err := os.WriteFile(m.cg.Path+"/cgroup.procs", []byte(strconv.Itoa(m.pid)), 0); err != nil {
			m.t.Errorf("cannot move pid %d into %s: %v", m.pid, m.cg.Path, err)
		}
	}
	return nil
}

func TestCgroupJoinerAfterWalkGetsTERM(t *testing.T) {
	testenv.NeedRoot(t, "creating a cgroup")
	t.Parallel()
	cg, err := cgroup.New("teardown-test-" + marks.New())
	if err != nil {
		testenv.Need(t, "a cgroup v2 with cgroup.kill: %v", err)
	}
	t.Cleanup(func() { cg.Kill(); cg.Remove(5 * time.Second) })
	l := newLineage(t)
	cmd := exec.Command("sleep", "600")
	cmd.Env = append(os.Environ(), marks.Env+"="+l.mark)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go cmd.Wait()
	st, err := proc.ReadStat(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	mt := &movingTracker{fakeTracker: fakeTracker{mark: l.mark}, t: t, cg: cg, pid: st.PID}
	td := &Teardown{Tracker: mt, Cgroup: cg, Grace: time.Minute, SurvivorWait: 10 * time.Second,
		Log: zerolog.New(zerolog.NewTestWriter(t)), Fate: l.fates.note}
	out := td.Run()
	if out.Termed != 1 {
		t.Errorf("outcome %+v: want the process that entered the cgroup TERMed", out)
	}
	l.wantFate(st.Ident, record.FateTerm)
	l.wantNoneLeft()
}
