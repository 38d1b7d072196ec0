// groups_test.go tests the process-group iterators as root: they list the
// members of a group, a leader's children in it included, and no one else,
// from this process's own copy and from the host's pinned one; the walk of
// one group answers as the pass over every task does, and says when it
// cannot answer.
package bpf

import (
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

	marks "github.com/gpu-hold/gpu-hold/internal/mark"
	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/testenv"
)

func TestGroupMembers(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run(copyName(shared), func(t *testing.T) {
			if shared {
				pinForTest(t, pinGroups)
			}
			groupsObjs.mu.Lock()
			groupsObjs.prog, groupsObjs.err, groupsObjs.shared = nil, nil, false
			if !shared {
				groupsObjs.prog, groupsObjs.err = loadGroupsPrograms()
			}
			groupsObjs.mu.Unlock()
			listGroup(t)
			if groupsObjs.shared != shared {
				t.Fatalf("listed with the shared copy: %v, want %v", groupsObjs.shared, shared)
			}
		})
	}
}

// listGroup starts a group of three (a leader and two children) and one
// process outside it, and lists the group.
func listGroup(t *testing.T) {
	leader, outside := startGroup(t)
	var got []int
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var err error
		got, err = GroupMembers(leader.Process.Pid)
		testenv.NeedBPF(t, err)
		if len(got) >= 3 {
			break
		}
	}
	if len(got) != 3 || !slices.Contains(got, leader.Process.Pid) || slices.Contains(got, outside.Process.Pid) {
		t.Fatalf("group %d lists %v: want the leader and its 2 children, not %d", leader.Process.Pid, got, outside.Process.Pid)
	}
	for _, pid := range got {
		if st, err := proc.ReadStat(pid); err != nil || st.PGID != leader.Process.Pid {
			t.Errorf("pid %d listed in group %d: %+v, %v", pid, leader.Process.Pid, st, err)
		}
	}
}

// startGroup starts a group of three (a leader and two children) and one
// process outside it, all marked, and waits for the children.
func startGroup(t *testing.T) (leader, outside *exec.Cmd) {
	t.Helper()
	mark := marks.New()
	start := func(script string) *exec.Cmd {
		cmd := exec.Command("bash", "-c", script)
		cmd.Env = append(os.Environ(), marks.Env+"="+mark)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	leader = start("sleep 300 & sleep 300 & wait")
	outside = start("exec sleep 300")
	t.Cleanup(func() { marks.Kill(mark); leader.Wait(); outside.Wait() })
	for deadline := time.Now().Add(10 * time.Second); len(marks.Live(mark)) < 4; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d marked processes after 10 s, want 4", len(marks.Live(mark)))
		}
	}
	return leader, outside
}

func TestGroupWalk(t *testing.T) {
	groupsObjs.mu.Lock()
	prog, err := groupsProgram()
	groupsObjs.mu.Unlock()
	testenv.NeedBPF(t, err)
	leader, outside := startGroup(t)
	pgid := leader.Process.Pid
	walked, ok := walkGroup(prog.ListGroupOf, pgid)
	if !ok {
		t.Fatalf("the walk of group %d did not answer, with its leader alive", pgid)
	}
	raw, err := runIter(prog.ListGroups, "process-group")
	if err != nil {
		t.Fatal(err)
	}
	records, err := groupRecords(raw)
	if err != nil {
		t.Fatal(err)
	}
	var passed []int
	for _, r := range records {
		if int(r.Pgid) == pgid {
			passed = append(passed, int(r.Tgid))
		}
	}
	slices.Sort(walked)
	slices.Sort(passed)
	if len(walked) != 3 || !slices.Equal(walked, passed) || slices.Contains(walked, outside.Process.Pid) {
		t.Fatalf("group %d: the walk lists %v, the pass over every task %v; want the same 3, not %d", pgid, walked, passed, outside.Process.Pid)
	}
}

// With no task of the group's number, the walk has nowhere to start: it
// must say so, not answer an empty group.
func TestGroupWalkWithoutLeader(t *testing.T) {
	groupsObjs.mu.Lock()
	prog, err := groupsProgram()
	groupsObjs.mu.Unlock()
	testenv.NeedBPF(t, err)
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	if members, ok := walkGroup(prog.ListGroupOf, gone.Process.Pid); ok {
		t.Fatalf("the walk answered %v for pid %d, which no task has", members, gone.Process.Pid)
	}
}

// A group larger than what the iterator takes from one object (4,096
// records of 8 bytes in its 32 KiB buffer) cannot be walked: the walk must
// not answer with part of it, and GroupMembers answers all of it from the
// pass over every task.
func TestGroupWalkTooLarge(t *testing.T) {
	groupsObjs.mu.Lock()
	prog, err := groupsProgram()
	groupsObjs.mu.Unlock()
	testenv.NeedBPF(t, err)
	const children = 4200
	// Forks of the shell that wait on a FIFO no one opens for writing: no
	// exec each, so the group starts in seconds under TCG too.
	fifo := t.TempDir() + "/wait"
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	mark := marks.New()
	leader := exec.Command("bash", "-c", `for ((i = 0; i < 4200; i++)); do { read -r _ <"$1"; } & done; wait`, "bash", fifo)
	leader.Env = append(os.Environ(), marks.Env+"="+mark)
	leader.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := leader.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { marks.Kill(mark); leader.Wait() })
	for deadline := time.Now().Add(5 * time.Minute); len(marks.Live(mark)) < children+1; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d marked processes after 5 minutes, want %d", len(marks.Live(mark)), children+1)
		}
	}
	pgid := leader.Process.Pid
	if members, ok := walkGroup(prog.ListGroupOf, pgid); ok {
		t.Fatalf("the walk answered %d members of a group of %d", len(members), children+1)
	}
	all, err := GroupMembers(pgid)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != children+1 {
		t.Fatalf("GroupMembers listed %d of a group of %d", len(all), children+1)
	}
}

// A walk's records answer only when they are the group's members and then
// the one record of the list's end: a walk cut short, or one run on other
// tasks too (a kernel that ignores the link's task filter), answers
// nothing.
func TestWalkedRecords(t *testing.T) {
	end := groupsTaskGroup{Tgid: 100}
	for _, c := range []struct {
		name    string
		records []groupsTaskGroup
		want    []int
	}{
		{"the group and its end", []groupsTaskGroup{{Tgid: 100, Pgid: 100}, {Tgid: 101, Pgid: 100}, end}, []int{100, 101}},
		{"an empty group and its end", []groupsTaskGroup{end}, []int{}},
		{"nothing", nil, nil},
		{"cut short", []groupsTaskGroup{{Tgid: 100, Pgid: 100}, {Tgid: 101, Pgid: 100}}, nil},
		{"another task's walk first", []groupsTaskGroup{{Tgid: 7, Pgid: 7}, {Tgid: 7}, {Tgid: 100, Pgid: 100}, end}, nil},
		{"another task's end last", []groupsTaskGroup{{Tgid: 100, Pgid: 100}, end, {Tgid: 7}}, nil},
	} {
		got, ok := walked(c.records, 100)
		if ok != (c.want != nil) || ok && !slices.Equal(got, c.want) && len(got)+len(c.want) > 0 {
			t.Errorf("%s: %v, %v; want %v", c.name, got, ok, c.want)
		}
	}
}
