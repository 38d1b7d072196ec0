// task_test.go checks that a process whose main thread has exited while
// others run is alive to everything a teardown asks, and that its files
// are read from a live thread.
package proc

import (
	"bytes"
	"os"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/gpu-hold/gpu-hold/internal/cprog"
)

// A stat in state Z is dead only when no other thread is left: field 20
// counts the threads.
func TestDeadCountsThreads(t *testing.T) {
	for _, c := range []struct {
		state   string
		threads int
		dead    bool
	}{{"Z", 1, true}, {"Z", 2, false}, {"X", 1, true}, {"S", 1, false}, {"S", 3, false}} {
		line := "9 (x) " + c.state + " 1 9 9 0 -1 0 0 0 0 0 0 0 0 0 20 0 " + strconv.Itoa(c.threads) + " 0 555 1000 200\n"
		st, err := parseStat(9, line)
		if err != nil || st.Threads != c.threads || st.Dead() != c.dead {
			t.Errorf("%s with %d threads: %+v, %v; want dead=%v", c.state, c.threads, st, err, c.dead)
		}
	}
}

// A real one: it shows Z, and everything that decides whether a teardown
// signals it says it is alive; its environ, cmdline and exe come from its
// live thread; a pidfd opened on it ends it.
func TestZombieLeaderIsAlive(t *testing.T) {
	mark := markEnv()
	cmd := cprog.StartZombieLeader(t, []string{mark})
	prog := cmd.Path
	pid := cmd.Process.Pid
	st, err := ReadStat(pid)
	if err != nil || st.State != 'Z' || st.Threads != 2 {
		t.Fatalf("test shape: stat %+v, %v; want state Z with 2 threads", st, err)
	}
	if st.Dead() || !Alive(st.Ident) {
		t.Errorf("a process with a live thread counts as dead: %+v", st)
	}
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); len(b) != 0 {
		t.Fatalf("test shape: the main thread still shows a cmdline (%q, %v)", b, err)
	}
	if env, err := ReadFile(pid, "environ"); !bytes.Contains(env, []byte(mark)) {
		t.Errorf("ReadFile(environ) = %d bytes, %v; want the live thread's, with %s", len(env), err, mark)
	}
	if argv := Cmdline(pid, 4, 256); !reflect.DeepEqual(argv, cmd.Args) {
		t.Errorf("Cmdline = %q, want %q", argv, cmd.Args)
	}
	if dir := st.Dir(); !strings.HasPrefix(dir, "/proc/"+strconv.Itoa(pid)+"/task/") {
		t.Errorf("Dir() = %s, want a live thread's directory", dir)
	} else if exe, err := os.Readlink(dir + "/exe"); exe != prog {
		t.Errorf("exe through Dir() = %q, %v; want %s", exe, err, prog)
	}
	h, err := Open(st.Ident)
	if err != nil {
		t.Fatalf("Open: %v; a teardown could not signal it", err)
	}
	defer h.Close()
	if err := h.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if ws := cmd.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("after KILL through its pidfd: %v", cmd.ProcessState)
	}
}
