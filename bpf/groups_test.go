// groups_test.go tests the process-group iterator as root: it lists the
// members of a group, a leader's children in it included, and no one else,
// from this process's own copy and from the host's pinned one.
package bpf

import (
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

	marks "github.com/gpu-hold/gpu-hold/internal/mark"
	"github.com/gpu-hold/gpu-hold/internal/testenv"
	"github.com/gpu-hold/gpu-hold/proc"
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
				groupsObjs.prog, groupsObjs.err = loadOwnGroups()
			}
			groupsObjs.mu.Unlock()
			listGroup(t)
			if groupsObjs.shared != shared {
				t.Fatalf("listed with the shared copy: %v, want %v", groupsObjs.shared, shared)
			}
		})
	}
}

// loadOwnGroups loads this process's own copy, as a host without a pinned
// one does.
func loadOwnGroups() (*groupsPrograms, error) {
	spec, err := loadGroups()
	if err != nil {
		return nil, err
	}
	var objs groupsObjects
	if err := spec.LoadAndAssign(&objs, loadOptions()); err != nil {
		return nil, err
	}
	return &objs.groupsPrograms, nil
}

// listGroup starts a group of three (a leader and two children) and one
// process outside it, and lists the group.
func listGroup(t *testing.T) {
	mark := marks.New()
	start := func(pgid bool, script string) *exec.Cmd {
		cmd := exec.Command("bash", "-c", script)
		cmd.Env = append(os.Environ(), marks.Env+"="+mark)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: pgid}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	leader := start(true, "sleep 300 & sleep 300 & wait")
	outside := start(true, "exec sleep 300")
	t.Cleanup(func() { marks.Kill(mark); leader.Wait(); outside.Wait() })
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
