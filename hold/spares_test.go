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

	marks "github.com/gpu-hold/gpu-hold/internal/mark"
)

const schedIdle = "5" // SCHED_IDLE, as /proc/PID/stat's policy field shows it

func TestMakerStartsIdle(t *testing.T) {
	mark := marks.New()
	cmd := exec.Command("sleep", "10")
	cmd.Env = append(os.Environ(), marks.Env+"="+mark)
	if err := startIdle(cmd); err != nil {
		t.Fatal(err)
	}
	defer func() { marks.Kill(mark); cmd.Wait() }()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command, which ends at the last ')'; policy is 41st.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 39 {
		t.Fatalf("/proc/%d/stat has %d fields after the command: %s", cmd.Process.Pid, len(f), b)
	}
	if f[38] != schedIdle {
		t.Fatalf("the maker's policy when started: %s, want SCHED_IDLE (%s)", f[38], schedIdle)
	}
}
