// pending_hostile_test.go tests the pending files of a shared
// --metrics-dir against another uid of its group that plants, links,
// floods or removes them: no count goes back or wraps, no merge fails for
// good or does unbounded work, and a hold whose file was taken says so.
package metrics

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/plant"
)

const pendingBase = ".gpu_hold_gpu.pending-"

func init() {
	// plant-pending: uid OtherUID writes the pending files PENDING (a JSON
	// list of bodies) into METRICS_DIR, N copies of each (default 1), each
	// under a fresh name.
	plant.Helpers["plant-pending"] = func(t *testing.T) {
		dir := os.Getenv("METRICS_DIR")
		var bodies []string
		if err := json.Unmarshal([]byte(os.Getenv("PENDING")), &bodies); err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(os.Getenv("N"))
		for i, b := range bodies {
			for j := range max(n, 1) {
				name := filepath.Join(dir, fmt.Sprintf("%s%06d%06d.json", pendingBase, i, j))
				if err := os.WriteFile(name, []byte(strings.ReplaceAll(b, "$J", strconv.Itoa(j))), 0o664); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	// plant-fifos: uid OtherUID makes N FIFOs named as pending files.
	plant.Helpers["plant-fifos"] = func(t *testing.T) {
		n, _ := strconv.Atoi(os.Getenv("N"))
		for i := range n {
			if err := unix.Mkfifo(filepath.Join(os.Getenv("METRICS_DIR"), fmt.Sprintf("%sfifo%06d.json", pendingBase, i)), 0o664); err != nil {
				t.Fatal(err)
			}
		}
	}
	// link-pending: uid OtherUID links every pending file of METRICS_DIR
	// under a second pending name.
	plant.Helpers["link-pending"] = func(t *testing.T) {
		dir := os.Getenv("METRICS_DIR")
		for _, n := range pendingNames(t, dir) {
			if err := os.Link(filepath.Join(dir, n), filepath.Join(dir, pendingBase+"0link-"+n[len(pendingBase):])); err != nil {
				t.Fatal(err)
			}
		}
	}
	// remove-pending: uid OtherUID removes every pending file of METRICS_DIR.
	plant.Helpers["remove-pending"] = func(t *testing.T) {
		dir := os.Getenv("METRICS_DIR")
		for _, n := range pendingNames(t, dir) {
			if err := os.Remove(filepath.Join(dir, n)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func pendingNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if isPending(".gpu_hold_gpu", e.Name()) {
			out = append(out, e.Name())
		}
	}
	return out
}

// asOther runs helper what as plant.OtherUID in dir, failing the test when
// it fails.
func asOther(t *testing.T, what, dir string, env ...string) {
	t.Helper()
	if out, err := plant.AsOther(t, what, append(env, "METRICS_DIR="+dir)...); err != nil {
		t.Fatalf("helper %s as uid %d: %v\n%s", what, plant.OtherUID, err, out)
	}
}

func promOf(t *testing.T, dir string) ([]byte, float64) {
	t.Helper()
	data, err := os.ReadFile(File(dir, "gpu"))
	if err != nil {
		t.Fatal(err)
	}
	return data, value(t, parseProm(t, data), "gpu_hold_holds_total", nil)
}

// Another uid's pending files with times below zero are not counted; huge
// counts saturate: no counter of the state goes back or wraps.
func TestMetricsPendingCannotSubtract(t *testing.T) {
	dir := plant.SharedDir(t)
	if err := Record(dir, "gpu", Hold{Granted: true, Wait: 2 * time.Second, Hold: time.Minute, LostEvents: 3, Survivors: 1}); err != nil {
		t.Fatal(err)
	}
	bodies, _ := json.Marshal([]string{
		`{"Granted":true,"Wait":-1000000000000000000,"Hold":-1000000000000000000}`,
		`{"LostEvents":18446744073709551615,"Survivors":9223372036854775807,"DeviceHolders":-5}`,
		`{"LostEvents":18446744073709551615,"Survivors":9223372036854775807}`,
		`{"Survivors":9223372036854775807}`,
	})
	asOther(t, "plant-pending", dir, "PENDING="+string(bodies))
	err := Record(dir, "gpu", Hold{Granted: true, Wait: time.Second, Hold: time.Minute})
	plant.Says(t, err, "a merge of pending files with counts below zero", "below zero", "not counted")
	data, holds := promOf(t, dir)
	fams := parseProm(t, data)
	if sum, _ := summary(t, fams, "gpu_hold_wait_seconds", "gpu"); sum < 3 {
		t.Errorf("wait seconds sum %v after a planted pending file, want 3: a planted time took from it", sum)
	}
	if sum, _ := summary(t, fams, "gpu_hold_hold_seconds", "gpu"); sum < 120 {
		t.Errorf("hold seconds sum %v after a planted pending file, want 120: a planted time took from it", sum)
	}
	for _, name := range []string{"gpu_hold_lost_events_total", "gpu_hold_survivors_total"} {
		if v := value(t, fams, name, nil); v < math.MaxUint64/2 {
			t.Errorf("%s = %v after huge planted counts, want it saturated (%v): it wrapped", name, v, float64(math.MaxUint64))
		}
	}
	if holds != 4 {
		t.Errorf("holds total %v, want 4: the two holds and the two planted files with counts above zero", holds)
	}
}

// Pending files whose causes are long and all different do not grow the
// state past what a merge reads: the next merge still works.
func TestMetricsPendingCausesBounded(t *testing.T) {
	dir := plant.SharedDir(t)
	cause := strings.Repeat("x", 3000)
	bodies, _ := json.Marshal([]string{`{"Cause":"` + cause + `$J"}`, `{"Cause":"c$J"}`})
	asOther(t, "plant-pending", dir, "PENDING="+string(bodies), "N=500")
	plant.Within(t, "a merge of 1000 planted causes", func() {
		err := Record(dir, "gpu", Hold{Granted: true})
		plant.Says(t, err, "a merge of 1001 pending files", "1 pending files", "wait for a later merge")
	})
	if err := Record(dir, "gpu", Hold{Granted: true}); err != nil {
		t.Fatalf("the merge after 1000 planted causes: %v", err)
	}
	data, holds := promOf(t, dir)
	if holds != 1002 {
		t.Errorf("holds total %v, want 1002", holds)
	}
	if n := len(parseProm(t, data)["gpu_hold_exits_total"].Metric); n > 100 {
		t.Errorf("%d values of the cause label, want at most 100", n)
	}
}

// Thousands of FIFOs named as pending files: a merge neither blocks nor
// opens them all, and its error names a few and counts the rest.
func TestMetricsPendingFloodBounded(t *testing.T) {
	dir := plant.SharedDir(t)
	asOther(t, "plant-fifos", dir, "N=5000")
	var err error
	plant.Within(t, "a merge beside 5000 planted FIFOs", func() {
		err = Record(dir, "gpu", Hold{Granted: true})
	})
	plant.Says(t, err, "a merge beside 5000 planted FIFOs", "FIFO", "more pending files", "wait for a later merge")
	if len(err.Error()) > 4096 {
		t.Errorf("the merge's error is %d bytes long, want a bounded report", len(err.Error()))
	}
	if _, holds := promOf(t, dir); holds != 1 {
		t.Errorf("holds total %v, want 1", holds)
	}
}

// A pending file another uid linked under a second pending name counts
// once.
func TestMetricsPendingHardLinkCountsOnce(t *testing.T) {
	dir := plant.SharedDir(t)
	// A hold's pending file, left for a later merge by a held lock.
	f := lockAfterOneHold(t, dir)
	defer func(w time.Duration) { mergeWait = w }(mergeWait)
	mergeWait = 10 * time.Millisecond
	var pe *PendingError
	if err := Record(dir, "gpu", Hold{Granted: true}); !errors.As(err, &pe) {
		t.Fatalf("Record under a held lock: %v, want a PendingError", err)
	}
	asOther(t, "link-pending", dir)
	unix.Flock(int(f.Fd()), unix.LOCK_UN)
	mergeWait = 10 * time.Second
	if err := Merge(dir, "gpu"); err != nil {
		t.Fatal(err)
	}
	if _, holds := promOf(t, dir); holds != 2 {
		t.Errorf("holds total %v, want 2: a pending file linked under a second name counted twice", holds)
	}
	if n := pendingNames(t, dir); len(n) != 0 {
		t.Errorf("pending files left after the merge: %v", n)
	}
}

// In the documented shared dir (setgid, no sticky bit) another member of
// the group can remove a hold's pending file before it is merged: the hold
// says its counts were lost.
func TestMetricsPendingRemovedIsReported(t *testing.T) {
	dir := plant.SharedDir(t)
	if err := unix.Chmod(dir, 0o2775); err != nil {
		t.Fatal(err)
	}
	f := lockAfterOneHold(t, dir)
	done := make(chan error, 1)
	go func() { done <- Record(dir, "gpu", Hold{Granted: true}) }()
	// The Record's pending file, written before it waits for the lock.
	for len(pendingNames(t, dir)) == 0 {
		select {
		case err := <-done:
			t.Fatalf("Record returned under a held lock: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
	asOther(t, "remove-pending", dir)
	unix.Flock(int(f.Fd()), unix.LOCK_UN)
	err := <-done
	plant.Says(t, err, "a Record whose pending file was removed", "removed or renamed", "not counted")
	if _, holds := promOf(t, dir); holds != 1 {
		t.Errorf("holds total %v, want 1", holds)
	}
	var st syscall.Stat_t
	if syscall.Stat(dir, &st) != nil {
		t.Fatal("the dir is gone")
	}
}
