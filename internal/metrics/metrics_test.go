// metrics_test.go tests the textfile metrics: the file parses with the
// Prometheus text format parser, counters add up across holds and across
// concurrent writers, and the file is replaced atomically.
package metrics

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"golang.org/x/sys/unix"
)

// parseProm parses a textfile strictly (legacy metric names, as node_exporter
// 's textfile collector accepts everywhere).
func parseProm(t *testing.T, data []byte) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("metrics file does not parse: %v\n%s", err, data)
	}
	return fams
}

// value returns the sample of family name whose labels include want.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	t.Helper()
	f := fams[name]
	if f == nil {
		t.Fatalf("no family %s", name)
	}
	if f.GetHelp() == "" {
		t.Errorf("%s has no HELP", name)
	}
next:
	for _, m := range f.Metric {
		got := map[string]string{}
		for _, l := range m.Label {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				continue next
			}
		}
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			return m.GetCounter().GetValue()
		case dto.MetricType_GAUGE:
			return m.GetGauge().GetValue()
		}
		t.Fatalf("%s: unexpected type %v", name, f.GetType())
	}
	t.Fatalf("%s has no sample with labels %v", name, want)
	return 0
}

func summary(t *testing.T, fams map[string]*dto.MetricFamily, name, resource string) (float64, uint64) {
	t.Helper()
	f := fams[name]
	if f == nil || f.GetType() != dto.MetricType_SUMMARY || len(f.Metric) != 1 {
		t.Fatalf("%s is not one summary: %v", name, f)
	}
	m := f.Metric[0]
	if len(m.Label) != 1 || m.Label[0].GetValue() != resource {
		t.Errorf("%s labels: %v", name, m.Label)
	}
	return m.GetSummary().GetSampleSum(), m.GetSummary().GetSampleCount()
}

func TestMetricsAccumulateAcrossHolds(t *testing.T) {
	dir := t.TempDir()
	end := time.Unix(1700000000, 500_000_000)
	holds := []Hold{
		{Granted: true, Cause: "exited", Wait: 2 * time.Second, Hold: 60 * time.Second, DeviceHolders: 1, LostEvents: 3},
		{Granted: true, Cause: "max-hold", Wait: 500 * time.Millisecond, Hold: 120 * time.Second, Survivors: 2},
		{Granted: false, Cause: "queue", Wait: 30 * time.Second, End: end},
	}
	for _, m := range holds {
		if err := Record(dir, "gpu", m); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, "gpu_hold_gpu.prom"))
	if err != nil {
		t.Fatal(err)
	}
	fams := parseProm(t, data)
	gpu := map[string]string{"resource": "gpu"}
	for name, want := range map[string]float64{
		"gpu_hold_holds_total":                 3,
		"gpu_hold_holds_granted_total":         2,
		"gpu_hold_survivors_total":             2,
		"gpu_hold_device_holders_total":        1,
		"gpu_hold_lost_events_total":           3,
		"gpu_hold_last_hold_timestamp_seconds": 1700000000.5,
	} {
		if got := value(t, fams, name, gpu); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	for cause, want := range map[string]float64{"exited": 1, "max-hold": 1, "queue": 1, "mem-floor": 0, "device-holders": 0} {
		if got := value(t, fams, "gpu_hold_exits_total", map[string]string{"resource": "gpu", "cause": cause}); got != want {
			t.Errorf("exits{cause=%s} = %v, want %v", cause, got, want)
		}
	}
	if sum, n := summary(t, fams, "gpu_hold_wait_seconds", "gpu"); sum != 32.5 || n != 3 {
		t.Errorf("wait: sum %v count %d", sum, n)
	}
	if sum, n := summary(t, fams, "gpu_hold_hold_seconds", "gpu"); sum != 180 || n != 2 {
		t.Errorf("hold: sum %v count %d", sum, n)
	}
	for _, name := range []string{"gpu_hold_holds_total", "gpu_hold_wait_seconds"} {
		if !bytes.Contains(data, []byte("# TYPE "+name+" ")) || !bytes.Contains(data, []byte("# HELP "+name+" ")) {
			t.Errorf("no HELP/TYPE for %s", name)
		}
	}
	// A hold with an unknown cause gets its own label value; "" is "unknown".
	Record(dir, "gpu", Hold{Cause: "odd"})
	Record(dir, "gpu", Hold{})
	data, _ = os.ReadFile(File(dir, "gpu"))
	fams = parseProm(t, data)
	for _, c := range []string{"odd", "unknown"} {
		if value(t, fams, "gpu_hold_exits_total", map[string]string{"cause": c}) != 1 {
			t.Errorf("cause %s not counted", c)
		}
	}
}

func TestMetricsPerResourceFiles(t *testing.T) {
	dir := t.TempDir()
	for _, r := range []string{"gpu", "npu", `we"ird\name`} {
		if err := Record(dir, r, Hold{Granted: true, Cause: "exited"}); err != nil {
			t.Fatal(err)
		}
	}
	ents, _ := os.ReadDir(dir)
	var proms []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".prom") {
			proms = append(proms, e.Name())
		} else if !strings.HasPrefix(e.Name(), ".") {
			t.Errorf("%s in the metrics dir: anything but *.prom must be hidden", e.Name())
		}
	}
	if strings.Join(proms, " ") != "gpu_hold_gpu.prom gpu_hold_npu.prom gpu_hold_we_ird_name.prom" {
		t.Errorf("files: %v", proms)
	}
	data, _ := os.ReadFile(File(dir, `we"ird\name`))
	fams := parseProm(t, data)
	if value(t, fams, "gpu_hold_holds_granted_total", map[string]string{"resource": `we"ird\name`}) != 1 {
		t.Error("escaped resource label not read back")
	}
	if err := Record(filepath.Join(dir, "missing"), "gpu", Hold{}); err == nil {
		t.Error("a missing metrics dir must be an error")
	}
}

func TestMetricsCorruptState(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, ".gpu_hold_gpu.state.json")
	os.WriteFile(state, []byte("{half"), 0o644)
	err := Record(dir, "gpu", Hold{})
	if err == nil || !strings.Contains(err.Error(), state) || !strings.Contains(err.Error(), "remove it") {
		t.Errorf("corrupt state: %v", err)
	}
}

// Many holds record at once (goroutines: each opens the lock file itself, so
// flock orders them as it orders processes) while a reader reads the file
// in a loop: no update is lost, and no read sees a partial file. A writer
// that gave up its wait on a loaded host is no failure: its counts wait in
// its pending file, and the last Merge adds them.
func TestMetricsConcurrentAndAtomic(t *testing.T) {
	dir := t.TempDir()
	const writers, each = 4, 25
	if err := Record(dir, "gpu", Hold{Granted: true, Cause: "exited"}); err != nil {
		t.Fatal(err)
	}
	path := File(dir, "gpu")
	var stop atomic.Bool
	var reads int
	var bad error
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		for !stop.Load() {
			data, err := os.ReadFile(path)
			if err != nil {
				bad = err
				return
			}
			p := expfmt.NewTextParser(model.LegacyValidation)
			fams, err := p.TextToMetricFamilies(bytes.NewReader(data))
			if err == nil && fams["gpu_hold_last_hold_timestamp_seconds"] == nil {
				err = fmt.Errorf("the last family is missing")
			}
			if err != nil {
				bad = fmt.Errorf("read %d saw a partial or broken file: %v\n%s", reads, err, data)
				return
			}
			reads++
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if err := Record(dir, "gpu", Hold{Granted: true, Cause: "exited", Wait: time.Second}); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	stop.Store(true)
	<-readerDone
	close(errs)
	for err := range errs {
		// Kept in its pending file, added by a later merge: not lost.
		var pe *PendingError
		if !errors.As(err, &pe) {
			t.Fatal(err)
		}
		t.Logf("a writer gave up its wait (the final Merge adds it): %v", err)
	}
	if err := Merge(dir, "gpu"); err != nil {
		t.Fatal(err)
	}
	if bad != nil {
		t.Fatal(bad)
	}
	if reads == 0 {
		t.Fatal("the reader never read the file")
	}
	data, _ := os.ReadFile(path)
	fams := parseProm(t, data)
	if got := value(t, fams, "gpu_hold_holds_granted_total", nil); got != 1+writers*each {
		t.Errorf("granted = %v, want %d: updates were lost", got, 1+writers*each)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") || strings.Contains(e.Name(), ".pending-") {
			t.Errorf("temp or pending file left behind: %s", e.Name())
		}
	}
}

// A writer that holds the lock longer than a loaded host's writes take
// (seconds, where a quiet one takes milliseconds) and then lets go: a
// Record waiting behind it writes its counts, and says nothing is wrong.
func TestMetricsSlowWriterLosesNothing(t *testing.T) {
	dir := t.TempDir()
	f := lockAfterOneHold(t, dir)
	go func() {
		time.Sleep(1500 * time.Millisecond)
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
	}()
	if err := Record(dir, "gpu", Hold{Granted: true}); err != nil {
		t.Fatalf("Record behind a writer that held the lock for 1.5 s: %v", err)
	}
	data, _ := os.ReadFile(File(dir, "gpu"))
	if n := value(t, parseProm(t, data), "gpu_hold_holds_granted_total", nil); n != 2 {
		t.Errorf("holds granted %v, want 2: the hold behind a slow writer was not counted", n)
	}
}

// A pending file the state already counts (a merge cut short before it
// removed it, or another uid's in a sticky dir, which only that uid may
// remove) is not counted again; the next merge that may removes it.
func TestMetricsPendingCountedOnce(t *testing.T) {
	dir := t.TempDir()
	if err := Record(dir, "gpu", Hold{Granted: true}); err != nil {
		t.Fatal(err)
	}
	// The same file, back as if its removal had not happened.
	left := ".gpu_hold_gpu.pending-000000000000.json"
	if err := os.WriteFile(filepath.Join(dir, left), []byte(`{"Granted":true}`), 0o664); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, ".gpu_hold_gpu.state.json")
	data, _ := os.ReadFile(state)
	var st metricsState
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	st.Merged = []string{left}
	data, _ = json.Marshal(st)
	os.WriteFile(state, data, 0o664)
	if err := Record(dir, "gpu", Hold{Granted: true}); err != nil {
		t.Fatal(err)
	}
	data, _ = os.ReadFile(File(dir, "gpu"))
	if n := value(t, parseProm(t, data), "gpu_hold_holds_granted_total", nil); n != 2 {
		t.Errorf("holds granted %v, want 2: a pending file the state counted was counted again", n)
	}
	if _, err := os.Lstat(filepath.Join(dir, left)); err == nil {
		t.Error("the pending file the state counted is still there")
	}
}

// lockAfterOneHold records one hold in dir (which makes the lock file), then
// holds the metrics lock of resource gpu as another writer would, until the
// test ends; it returns the locked file, to let go of it early.
func lockAfterOneHold(t *testing.T, dir string) *os.File {
	t.Helper()
	if err := Record(dir, "gpu", Hold{Granted: true}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, ".gpu_hold_gpu.lock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	return f
}
