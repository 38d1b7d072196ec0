// checks_test.go tests what ties the checks to a hold: the exit code a
// failed device check gives, and that the metrics know every cause a hold
// reports.
package hold

import (
	"os"
	"strings"
	"testing"

	"github.com/gpu-hold/gpu-hold/device"
	"github.com/gpu-hold/gpu-hold/metrics"
	"github.com/gpu-hold/gpu-hold/proc"
	"github.com/gpu-hold/gpu-hold/record"
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

// The baseline scan runs beside the payload's start, so it may see the
// payload's own processes: only holders started before the payload are a
// baseline (a survivor of the payload's holding the device is reported).
func TestBaselineKeepsOnlyEarlierHolders(t *testing.T) {
	root := proc.Ident{PID: 500, Start: 1000}
	daemon := device.Holder{Ident: proc.Ident{PID: 10, Start: 999}}
	payload := device.Holder{Ident: root}
	child := device.Holder{Ident: proc.Ident{PID: 501, Start: 1001}}
	scan := &baselineScan{done: make(chan struct{}), hs: []device.Holder{daemon, payload, child}}
	close(scan.done)
	b := scan.before(root)
	if !b.Contains(daemon.Ident) || b.Contains(payload.Ident) || b.Contains(child.Ident) {
		t.Fatalf("baseline %v: want the daemon only", b)
	}
}
