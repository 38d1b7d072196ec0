// creds_test.go checks EUID's two sources (a pidfd, the status) against
// the process's effective uid, which its real uid differs from here.
package proc

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/testenv"
)

func TestEUIDIsTheEffectiveUID(t *testing.T) {
	testenv.NeedRoot(t, "starting a process whose real and effective uids differ")
	if _, err := exec.LookPath("setpriv"); err != nil {
		testenv.Need(t, "no setpriv (util-linux) to start a process with a real uid 0 and an effective uid 65534")
	}
	cmd := exec.Command("setpriv", "--euid", "65534", "sleep", "300")
	cmd.Env = append(os.Environ(), markEnv())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	pid := cmd.Process.Pid
	waitExec(t, pid, "sleep")
	st, err := ReadStat(pid)
	if err != nil {
		t.Fatal(err)
	}
	h, err := Open(st.Ident)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if uid, ok := pidfdEUID(h.FD); ok && uid != 65534 {
		t.Errorf("the pidfd says effective uid %d, want 65534 (real uid 0)", uid)
	} else if !ok && pidfdInfoExpected() {
		t.Errorf("the pidfd did not answer on Linux %s (PIDFD_GET_INFO is 6.13's)", release())
	}
	noPidfdInfo.Store(true)
	defer noPidfdInfo.Store(false)
	if uid, err := EUIDOf(st.Ident); uid != 65534 {
		t.Errorf("the status says effective uid %d (%v), want 65534 (real uid 0)", uid, err)
	}
}

// waitExec waits until pid runs comm (setpriv has set its ids and exec'd).
func waitExec(t *testing.T, pid int, comm string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if st, err := ReadStat(pid); err == nil && st.Comm == comm {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d never ran %s", pid, comm)
		}
	}
}

func release() string {
	var u unix.Utsname
	unix.Uname(&u)
	return unix.ByteSliceToString(u.Release[:])
}

// pidfdInfoExpected: the kernel is 6.13 or later.
func pidfdInfoExpected() bool {
	v, _, _ := strings.Cut(release(), "-")
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return false
	}
	major, _ := strconv.Atoi(parts[0])
	minor, _ := strconv.Atoi(parts[1])
	return major > 6 || major == 6 && minor >= 13
}
