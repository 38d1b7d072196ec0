// checks_test.go tests what ties the checks to a hold: the exit code a
// failed device check gives, and that the metrics know every cause a hold
// reports.
package hold

import (
	"os"
	"strings"
	"testing"

	"github.com/gpu-hold/gpu-hold/internal/metrics"
	"github.com/gpu-hold/gpu-hold/internal/record"
)

func TestExitDeviceHolders(t *testing.T) {
	if ExitDeviceHolders != 73 {
		t.Errorf("ExitDeviceHolders is %d; the README documents 73", ExitDeviceHolders)
	}
}

// Every cause a hold can end with is written from the first hold, at 0
// (rates work from then on).
func TestMetricsKnowEveryCause(t *testing.T) {
	dir := t.TempDir()
	if err := metrics.Record(dir, "gpu", metrics.Hold{}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(metrics.File(dir, "gpu"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{string(record.CauseExited), string(record.CauseSignal), string(record.CauseMaxHold), string(record.CauseSignalled),
		string(record.CauseMemFloor), string(record.CauseExecFailed), string(record.CauseQueue), string(record.CauseError), string(record.CauseDeviceHolders)} {
		line := `gpu_hold_exits_total{resource="gpu",cause="` + c + `"} 0`
		if !strings.Contains(string(data), line) {
			t.Errorf("cause %q is not written at 0 (no %s in the metrics)", c, line)
		}
	}
}
