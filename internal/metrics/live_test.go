// live_test.go owns the tests of the live gauges, and of every file this
// package writes passing `promtool check metrics` (Debian's prometheus
// package; .ci/run installs it).
package metrics

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/testenv"
)

func TestLiveGauges(t *testing.T) {
	dir := t.TempDir()
	since := time.Unix(1700000000, 500000000)
	if err := WriteLive(dir, "gpu", Live{Held: true, Since: since, QueueLength: 3}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(LiveFile(dir, "gpu"))
	if err != nil {
		t.Fatal(err)
	}
	fams := parseProm(t, data)
	gpu := map[string]string{"resource": "gpu"}
	for name, want := range map[string]float64{"gpu_hold_token_held": 1, "gpu_hold_holder_since_timestamp_seconds": 1700000000.5, "gpu_hold_queue_length": 3} {
		if got := value(t, fams, name, gpu); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if err := WriteLive(dir, "gpu", Live{QueueLength: 2}); err != nil {
		t.Fatal(err)
	}
	data, _ = os.ReadFile(LiveFile(dir, "gpu"))
	fams = parseProm(t, data)
	if value(t, fams, "gpu_hold_token_held", gpu) != 0 || value(t, fams, "gpu_hold_holder_since_timestamp_seconds", gpu) != 0 {
		t.Errorf("free: %s", data)
	}
	// The live file never collides with a resource's counters file.
	if LiveFile(dir, "gpu") == File(dir, "gpu.live") || LiveFile(dir, "gpu") == File(dir, "gpu_live") {
		t.Error("live and counters files collide")
	}
}

func TestPromtoolCheckMetrics(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		testenv.Need(t, "promtool (Debian package prometheus) is not installed")
	}
	dir := t.TempDir()
	for _, c := range []string{"exited", "max-hold", "cancelled", "some-new-cause"} {
		if err := Record(dir, `we"ird\name`, Hold{Granted: true, Cause: c, Wait: time.Second, Hold: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	Record(dir, "gpu", Hold{})
	WriteLive(dir, "gpu", Live{Held: true, Since: time.Now(), QueueLength: 1})
	files, _ := filepath.Glob(filepath.Join(dir, "*.prom"))
	if len(files) != 3 {
		t.Fatalf("metrics files %v, want 3", files)
	}
	for _, f := range files {
		in, _ := os.Open(f)
		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = in
		out, err := cmd.CombinedOutput()
		in.Close()
		if err != nil || strings.TrimSpace(string(out)) != "" {
			data, _ := os.ReadFile(f)
			t.Errorf("promtool check metrics %s: %v\n%s\n%s", filepath.Base(f), err, out, data)
		}
	}
}
