// ident_test.go checks the parts of process identity that a teardown trusts
// with its signals: the stat parser and the start-time checks.
package proc

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/testenv"
)

// A command name may hold spaces and parentheses: fields are counted from
// the last ')'. A parser that splits the whole line on spaces reads the
// wrong fields here.
func TestParseStatOddComm(t *testing.T) {
	line := "4242 (a) b (c d) S 17 4242 99 0 -1 4194304 100 0 0 0 1 2 0 0 20 0 1 0 123456 1000 200 18446744073709551615\n"
	st, err := parseStat(4242, line)
	if err != nil {
		t.Fatal(err)
	}
	if st.Comm != "a) b (c d" || st.State != 'S' || st.PPID != 17 || st.PGID != 4242 || st.SID != 99 || st.Start != 123456 {
		t.Fatalf("parsed %+v", st)
	}
}

func TestParseStatDamaged(t *testing.T) {
	for _, line := range []string{"", "12 (x", "12 (x) S 1 2 3", "12 (x) S 1 2 3 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 notanumber 0"} {
		if _, err := parseStat(12, line); err == nil {
			t.Errorf("parseStat(%q) gave no error", line)
		}
	}
}

func TestSelfAndZombie(t *testing.T) {
	self, err := Self()
	if err != nil || self.PID != os.Getpid() || self.Start == 0 {
		t.Fatalf("Self() = %+v, %v", self, err)
	}
	if !Alive(self) {
		t.Fatal("Alive(self) is false")
	}
	if Alive(Ident{PID: self.PID, Start: self.Start + 1}) {
		t.Fatal("Alive with another start time is true: a recycled pid would pass")
	}
	if _, err := Open(Ident{PID: self.PID, Start: self.Start + 1}); err != ErrGone {
		t.Fatalf("Open with another start time = %v, want ErrGone", err)
	}
}

// A zombie's stat carries its wait status (field 52), which the procfs
// tracker records without reaping it; a stat of another state, or one
// that ends before field 52, carries none.
func TestParseStatZombieStatus(t *testing.T) {
	fields := func(state string, n int) string {
		s := "77 (x) " + state
		for f := 4; f <= n; f++ {
			s += " " + strconv.Itoa(f)
		}
		return s + "\n"
	}
	for _, c := range []struct {
		line string
		want int
	}{
		{fields("Z", 52), 52},
		{fields("S", 52), -1},
		{fields("Z", 40), -1},
	} {
		st, err := parseStat(77, c.line)
		if err != nil || st.Status != c.want || st.Start != 22 {
			t.Errorf("parseStat(%q) = status %d start %d, %v; want status %d", c.line, st.Status, st.Start, err, c.want)
		}
	}
}

// The wait status read from a real zombie is what waitpid then gives.
func TestZombieStatus(t *testing.T) {
	mark := markEnv()
	start := func(args ...string) *exec.Cmd {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = append(os.Environ(), mark)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() }) // through its pidfd: never a reused pid
		return cmd
	}
	exit3 := start("sh", "-c", "exit 3")
	sleeper := start("sleep", "300")
	if st, err := ReadStat(sleeper.Process.Pid); err != nil || st.Dead() || st.Status != -1 {
		t.Fatalf("a live process's stat: %+v, %v; want status -1", st, err)
	}
	sleeper.Process.Kill()
	for _, c := range []struct {
		cmd  *exec.Cmd
		want syscall.WaitStatus
	}{{exit3, 3 << 8}, {sleeper, syscall.WaitStatus(syscall.SIGKILL)}} {
		var st Stat
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(2 * time.Millisecond) {
			var err error
			if st, err = ReadStat(c.cmd.Process.Pid); err != nil {
				t.Fatal(err)
			}
			if st.Dead() || time.Now().After(deadline) {
				break
			}
		}
		c.cmd.Wait()
		ws := c.cmd.ProcessState.Sys().(syscall.WaitStatus)
		if st.State != 'Z' || syscall.WaitStatus(st.Status) != ws || ws != c.want {
			t.Errorf("%v: stat state %c status %#x, waitpid %#x, want %#x", c.cmd.Args, st.State, st.Status, ws, c.want)
		}
	}
}

// The kernel shows a zombie's exit status only to a reader allowed to
// trace it; anyone else reads 0 in its place, which is why a hold without
// CAP_SYS_PTRACE trusts the field only for a zombie with its own ids.
func TestZombieStatusHiddenFromOthers(t *testing.T) {
	testenv.NeedRoot(t, "reading a root zombie's stat as another user")
	mark := markEnv()
	cmd := exec.Command("sh", "-c", "exit 3")
	cmd.Env = append(os.Environ(), mark)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	pid := cmd.Process.Pid
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		if st, err := ReadStat(pid); err != nil || st.Dead() || time.Now().After(deadline) {
			break
		}
	}
	if !OwnIDs(pid) || !OwnIDs(os.Getpid()) {
		t.Fatalf("OwnIDs is false for the test's own zombie %d or itself", pid)
	}
	cat := exec.Command("cat", "/proc/"+strconv.Itoa(pid)+"/stat")
	cat.Env = append(os.Environ(), mark)
	cat.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cat.Output()
	if err != nil {
		t.Fatalf("reading the stat as nobody: %v", err)
	}
	asNobody, err := parseStat(pid, string(out))
	if err != nil {
		t.Fatal(err)
	}
	asRoot, err := ReadStat(pid)
	if err != nil {
		t.Fatal(err)
	}
	if asRoot.Status != 3<<8 || asNobody.Status != 0 || asNobody.State != 'Z' {
		t.Fatalf("exit status as root %#x, as nobody %#x (state %c): want 0x300 and a hidden 0", asRoot.Status, asNobody.Status, asNobody.State)
	}
}

// OwnIDs is false for a process running as another user.
func TestOwnIDsOtherUser(t *testing.T) {
	testenv.NeedRoot(t, "starting a process as another user")
	cmd := exec.Command("sleep", "300")
	cmd.Env = append(os.Environ(), markEnv())
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	if OwnIDs(cmd.Process.Pid) {
		t.Fatal("OwnIDs is true for a process of uid 65534")
	}
}

// markEnv is a fresh test marker as an environment entry (the proc tests
// cannot import internal/mark, which imports proc).
func markEnv() string {
	var b [8]byte
	rand.Read(b[:])
	return "GPU_HOLD_TEST_MARK=gpuholdtest-" + hex.EncodeToString(b[:])
}
