// pidfd_test.go checks Group (OpenGroup, Signal), which a teardown trusts
// with the payload's whole group: it reaches a member after the leader has exited
// (the leader's zombie still holds the group), and a leader named with the
// wrong start time signals nothing.
package proc

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// groupWithZombieLeader starts a group whose leader (a shell, never waited
// for) exits at once, leaving a sleep in the group, and returns both.
func groupWithZombieLeader(t *testing.T) (leader, member Ident) {
	t.Helper()
	cmd := exec.Command("sh", "-c", `sleep 300 </dev/null >/dev/null 2>&1 & echo $!`)
	cmd.Env = append(os.Environ(), markEnv())
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	pid, aerr := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || aerr != nil {
		t.Fatalf("reading the member's pid: %q %v %v", line, err, aerr)
	}
	mst, err := ReadStat(pid)
	if err != nil {
		t.Fatal(err)
	}
	member = mst.Ident
	t.Cleanup(func() { Signal(member, syscall.SIGKILL); cmd.Wait() })
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		st, err := ReadStat(cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		if st.Dead() {
			leader = st.Ident
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the leader %d did not exit", cmd.Process.Pid)
		}
	}
	if mst.PGID != leader.PID {
		t.Fatalf("test shape: the member %d is in group %d, not the leader's %d", member.PID, mst.PGID, leader.PID)
	}
	return leader, member
}

func alive(id Ident) bool {
	st, err := ReadStat(id.PID)
	return err == nil && st.Start == id.Start && !st.Dead()
}

func TestSignalGroupZombieLeader(t *testing.T) {
	leader, member := groupWithZombieLeader(t)
	g, err := OpenGroup(leader)
	if err != nil {
		t.Fatalf("OpenGroup: %v", err)
	}
	defer g.Close()
	if err := g.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("Group.Signal: %v", err)
	}
	for deadline := time.Now().Add(5 * time.Second); alive(member); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the member %d of the zombie leader's group is alive 5 s after the group's KILL", member.PID)
		}
	}
}

func TestSignalGroupWrongStart(t *testing.T) {
	leader, member := groupWithZombieLeader(t)
	wrong := Ident{PID: leader.PID, Start: leader.Start + 1}
	if g, err := OpenGroup(wrong); err != ErrGone {
		t.Errorf("OpenGroup with the wrong start time returned %v, want ErrGone", err)
		if err == nil {
			g.Signal(syscall.SIGKILL)
			g.Close()
		}
	}
	time.Sleep(50 * time.Millisecond)
	if !alive(member) {
		t.Errorf("a group opened with the wrong start time killed the group's member %d", member.PID)
	}
}
