// spares_test.go tests how the spare maker is started: at SCHED_IDLE
// before its Go runtime is under way.
package hold

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

const schedIdle = "5" // SCHED_IDLE, as /proc/PID/stat's policy field shows it

func TestMakerStartsIdle(t *testing.T) {
	cmd := exec.Command("sleep", "10")
	if err := startIdle(cmd); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command, which ends at the last ')'; policy is 41st.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 39 || f[38] != schedIdle {
		t.Fatalf("the maker's policy when started: %v, want SCHED_IDLE (%s)", f[38:39], schedIdle)
	}
}
