// metrics.go owns --metrics-dir: one node_exporter textfile per resource,
// gpu_hold_<resource>.prom, with counters cumulative across holds. The
// counters live in a small JSON state file beside it (node_exporter reads
// only *.prom); each hold updates both under an flock and replaces each file
// atomically (temp file in the same dir, fsync, rename), so a scrape never
// sees half a file.
package hold

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// knownCauses are the values of the cause label that are always written
// (at 0, so rates work from the first hold): the Cause* values of run.go.
// A hold may report others.
var knownCauses = []string{string(CauseExited), string(CauseSignal), string(CauseMaxHold), string(CauseSignalled),
	string(CauseMemFloor), string(CauseQueue), string(CauseLaunch), string(CauseDeviceHolders), string(CauseError)}

// causeUnknown counts a hold that gave no cause.
const causeUnknown = "unknown"

// HoldMetrics is what one hold adds to its resource's metrics.
type HoldMetrics struct {
	Granted       bool          // the hold got the token
	Cause         string        // why it ended (Result.Cause: a Cause* value); "" counts as "unknown"
	Wait          time.Duration // time in the queue
	Hold          time.Duration // time holding the token (0 when not granted)
	Survivors     int           // processes that could not be ended
	DeviceHolders int           // holders outside the baseline found after teardown
	LostEvents    uint64        // tracker events lost (ring buffer overflow, ...)
	End           time.Time     // when the hold ended; zero means now
}

// metricsState is the cumulative state of one resource, kept as JSON.
type metricsState struct {
	Version       int               `json:"version"`
	Holds         uint64            `json:"holds"`
	Granted       uint64            `json:"granted"`
	Exits         map[string]uint64 `json:"exits"`
	WaitSum       float64           `json:"wait_seconds_sum"`
	WaitCount     uint64            `json:"wait_seconds_count"`
	HoldSum       float64           `json:"hold_seconds_sum"`
	HoldCount     uint64            `json:"hold_seconds_count"`
	Survivors     uint64            `json:"survivors"`
	DeviceHolders uint64            `json:"device_holders"`
	LostEvents    uint64            `json:"lost_events"`
	LastHold      float64           `json:"last_hold_timestamp_seconds"`
}

// MetricsFile returns the textfile path for resource in dir.
func MetricsFile(dir, resource string) string {
	return filepath.Join(dir, "gpu_hold_"+fileSafe(resource)+".prom")
}

// fileSafe maps a resource name to the characters a file name here may use.
func fileSafe(s string) string {
	if s == "" {
		return "_"
	}
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			return r
		}
		return '_'
	}, s)
}

// RecordMetrics adds one hold to resource's metrics in dir and rewrites
// gpu_hold_<resource>.prom. Holds on other resources may record into the same
// dir at the same time; an flock on a per-resource lock file orders the
// read-modify-write.
func RecordMetrics(dir, resource string, m HoldMetrics) error {
	if dir == "" {
		return nil
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("metrics dir %s is not a directory: create it or fix --metrics-dir", dir)
	}
	base := filepath.Join(dir, ".gpu_hold_"+fileSafe(resource))
	lock, err := os.OpenFile(base+".lock", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("metrics dir %s: %v; make it writable or drop --metrics-dir", dir, err)
	}
	defer lock.Close()
	if err := flock(lock); err != nil {
		return fmt.Errorf("locking %s: %v", lock.Name(), err)
	}
	defer unix.Flock(int(lock.Fd()), unix.LOCK_UN)

	statePath := base + ".state.json"
	st, err := readMetricsState(statePath)
	if err != nil {
		return err
	}
	st.add(m)
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	// The state first: if the .prom write then fails, the next hold
	// rewrites it from the state and nothing is counted twice or lost.
	if err := writeAtomic(statePath, append(data, '\n')); err != nil {
		return err
	}
	return writeAtomic(MetricsFile(dir, resource), []byte(st.render(resource)))
}

// flock takes an exclusive lock, retrying when a signal interrupts.
func flock(f *os.File) error {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// readMetricsState reads the state; a missing file is a fresh start, a
// corrupt one an error that says what to do.
func readMetricsState(path string) (*metricsState, error) {
	st := &metricsState{Version: 1, Exits: map[string]uint64{}}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading metrics state %s: %v", path, err)
	}
	if err := json.Unmarshal(data, st); err != nil {
		return nil, fmt.Errorf("metrics state %s is corrupt (%v): remove it (and its .prom) to start the counters afresh", path, err)
	}
	if st.Exits == nil {
		st.Exits = map[string]uint64{}
	}
	return st, nil
}

// add counts one hold.
func (st *metricsState) add(m HoldMetrics) {
	st.Holds++
	if m.Granted {
		st.Granted++
		st.HoldSum += m.Hold.Seconds()
		st.HoldCount++
	}
	cause := m.Cause
	if cause == "" {
		cause = causeUnknown
	}
	st.Exits[cause]++
	st.WaitSum += m.Wait.Seconds()
	st.WaitCount++
	if m.Survivors > 0 {
		st.Survivors += uint64(m.Survivors)
	}
	if m.DeviceHolders > 0 {
		st.DeviceHolders += uint64(m.DeviceHolders)
	}
	st.LostEvents += m.LostEvents
	end := m.End
	if end.IsZero() {
		end = time.Now()
	}
	st.LastHold = float64(end.UnixNano()) / 1e9
}

// render writes the state in the Prometheus text exposition format.
func (st *metricsState) render(resource string) string {
	var b strings.Builder
	res := `resource="` + escapeLabel(resource) + `"`
	family := func(name, typ, help string) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
	}
	sample := func(name, labels string, v float64) {
		fmt.Fprintf(&b, "%s{%s} %s\n", name, labels, formatValue(v))
	}
	family("gpu_hold_holds_total", "counter", "Holds that ended, granted or not.")
	sample("gpu_hold_holds_total", res, float64(st.Holds))
	family("gpu_hold_holds_granted_total", "counter", "Holds that were granted the token.")
	sample("gpu_hold_holds_granted_total", res, float64(st.Granted))

	family("gpu_hold_exits_total", "counter", "Holds by the cause of their end.")
	causes := append([]string(nil), knownCauses...)
	for c := range st.Exits {
		if !contains(knownCauses, c) {
			causes = append(causes, c)
		}
	}
	sort.Strings(causes)
	for _, c := range causes {
		sample("gpu_hold_exits_total", res+`,cause="`+escapeLabel(c)+`"`, float64(st.Exits[c]))
	}

	family("gpu_hold_wait_seconds", "summary", "Time spent waiting in the queue.")
	sample("gpu_hold_wait_seconds_sum", res, st.WaitSum)
	sample("gpu_hold_wait_seconds_count", res, float64(st.WaitCount))
	family("gpu_hold_hold_seconds", "summary", "Time granted holds held the token.")
	sample("gpu_hold_hold_seconds_sum", res, st.HoldSum)
	sample("gpu_hold_hold_seconds_count", res, float64(st.HoldCount))

	family("gpu_hold_survivors_total", "counter", "Processes that teardown could not end (recorded as survivors).")
	sample("gpu_hold_survivors_total", res, float64(st.Survivors))
	family("gpu_hold_device_holders_total", "counter", "Processes outside the baseline found holding the device after teardown.")
	sample("gpu_hold_device_holders_total", res, float64(st.DeviceHolders))
	family("gpu_hold_lost_events_total", "counter", "Tracker events lost.")
	sample("gpu_hold_lost_events_total", res, float64(st.LostEvents))
	family("gpu_hold_last_hold_timestamp_seconds", "gauge", "Unix time the last hold ended.")
	sample("gpu_hold_last_hold_timestamp_seconds", res, st.LastHold)
	return b.String()
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// escapeLabel escapes a label value for the text format.
func escapeLabel(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}

// formatValue renders a sample value as the text format wants it.
func formatValue(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// writeAtomic replaces path with data: a temp file in the same directory
// (a name node_exporter ignores), fsync, rename over path, fsync of the
// directory. Readers see the old file or the new one, never a part.
func writeAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("writing %s: %v", path, err)
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("writing %s: %v", tmp.Name(), err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		return fmt.Errorf("writing %s: %v", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %v", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %v", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("replacing %s: %v", path, err)
	}
	ok = true
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
