// metrics_hostile_test.go tests --metrics-dir against planted files and a
// second user: no file is opened through a symlink or when it is a FIFO or
// a device, files are group-writable whatever the umask, and a second uid's
// hold adds to the counters of the first.
package metrics

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/plant"
)

func TestMetricsPlantedFiles(t *testing.T) {
	names := map[string]string{
		"lock":  ".gpu_hold_gpu.lock",
		"state": ".gpu_hold_gpu.state.json",
		"prom":  "gpu_hold_gpu.prom",
	}
	for what, name := range names {
		t.Run(what+" symlink", func(t *testing.T) {
			dir := t.TempDir()
			target := filepath.Join(t.TempDir(), "nowhere")
			os.Symlink(target, filepath.Join(dir, name))
			plant.Within(t, "Record", func() {
				err := Record(dir, "gpu", Hold{Granted: true})
				plant.Says(t, err, "Record with a symlinked "+what, name, "symlink")
			})
			if _, err := os.Lstat(target); err == nil {
				t.Fatal("the symlink's target was created")
			}
		})
		t.Run(what+" fifo", func(t *testing.T) {
			dir := t.TempDir()
			plant.FIFO(t, filepath.Join(dir, name))
			plant.Within(t, "Record", func() {
				err := Record(dir, "gpu", Hold{Granted: true})
				plant.Says(t, err, "Record with a FIFO "+what, name, "FIFO")
			})
		})
		t.Run(what+" device", func(t *testing.T) {
			dir := t.TempDir()
			plant.Device(t, filepath.Join(dir, name))
			plant.Within(t, "Record", func() {
				err := Record(dir, "gpu", Hold{Granted: true})
				plant.Says(t, err, "Record with a device "+what, name, "device")
			})
		})
	}
}

// The group shares the metrics: the umask must not keep it out.
func TestMetricsFilesGroupWritable(t *testing.T) {
	old := unix.Umask(0o022)
	defer unix.Umask(old)
	dir := t.TempDir()
	if err := Record(dir, "gpu", Hold{Granted: true}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{".gpu_hold_gpu.lock", ".gpu_hold_gpu.state.json", "gpu_hold_gpu.prom"} {
		fi, err := os.Lstat(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o664 {
			t.Errorf("%s: mode %v, want 0664", n, fi.Mode().Perm())
		}
	}
}

func init() {
	plant.Helpers["metrics"] = func(t *testing.T) {
		if err := Record(os.Getenv("METRICS_DIR"), "gpu", Hold{Granted: true}); err != nil {
			t.Fatal(err)
		}
	}
}

// Root's hold, then another uid's, then root's again, in a setgid sticky
// dir: every hold is counted.
func TestMetricsTwoUsers(t *testing.T) {
	dir := plant.SharedDir(t)
	if err := Record(dir, "gpu", Hold{Granted: true}); err != nil {
		t.Fatal(err)
	}
	if out, err := plant.AsOther(t, "metrics", "METRICS_DIR="+dir); err != nil {
		t.Fatalf("uid %d's hold cannot write the metrics root's hold started: %v\n%s", plant.OtherUID, err, out)
	}
	// The dir is sticky: root's files could only be rewritten in place.
	var st unix.Stat_t
	if err := unix.Lstat(File(dir, "gpu"), &st); err != nil || st.Uid != 0 {
		t.Fatalf("the .prom after uid %d's hold: %v, owner %d; want root's file rewritten in place", plant.OtherUID, err, st.Uid)
	}
	if err := Record(dir, "gpu", Hold{Granted: true}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(File(dir, "gpu"))
	if err != nil {
		t.Fatal(err)
	}
	if n := value(t, parseProm(t, data), "gpu_hold_holds_total", map[string]string{"resource": "gpu"}); n != 3 {
		t.Fatalf("holds_total %v, want 3", n)
	}
}

// TestHelperAsOther is not a test of its own: it runs the helper
// plant.AsOther names, in the process it started as another uid.
func TestHelperAsOther(t *testing.T) { plant.RunHelper(t) }

// Any user who can read the metrics lock can hold it. The live gauges,
// written just before the release, need no lock: they are written, and
// at once. A Record gives up its wait within a bound, says so, and loses
// nothing: its counts are added by the next Record after the lock is free.
func TestMetricsLockHeldForEver(t *testing.T) {
	dir := t.TempDir()
	f := lockAfterOneHold(t, dir)
	plant.Within(t, "WriteLive under a held lock", func() {
		if err := WriteLive(dir, "gpu", Live{Held: true, Since: time.Now()}); err != nil {
			t.Fatalf("WriteLive under a held lock: %v", err)
		}
	})
	if held := liveHeld(t, dir); held != 1 {
		t.Errorf("live gauges under a held lock: token_held %v, want 1 (not written)", held)
	}
	defer func(w time.Duration) { mergeWait = w }(mergeWait)
	mergeWait = 200 * time.Millisecond
	plant.Within(t, "Record under a held lock", func() {
		err := Record(dir, "gpu", Hold{Granted: true})
		var pe *PendingError
		if !errors.As(err, &pe) {
			t.Fatalf("Record under a held lock: %v, want a PendingError", err)
		}
		plant.Says(t, err, "Record under a held lock", "fuser", "kept in", "next hold")
	})
	unix.Flock(int(f.Fd()), unix.LOCK_UN)
	if err := Record(dir, "gpu", Hold{Granted: true}); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(File(dir, "gpu"))
	if n := value(t, parseProm(t, data), "gpu_hold_holds_granted_total", nil); n != 3 {
		t.Errorf("holds granted %v after the lock was let go, want 3: the hold that gave up its wait was lost", n)
	}
}

// liveHeld is gpu_hold_token_held in dir's live gauges for gpu.
func liveHeld(t *testing.T, dir string) float64 {
	t.Helper()
	data, err := os.ReadFile(LiveFile(dir, "gpu"))
	if err != nil {
		t.Fatal(err)
	}
	return value(t, parseProm(t, data), "gpu_hold_token_held", nil)
}
