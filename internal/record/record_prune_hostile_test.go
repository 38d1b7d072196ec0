// record_prune_hostile_test.go tests pruning against planted files: a
// symlinked records dir is never pruned, and symlinks, FIFOs and device
// nodes named like records are neither opened nor removed.
package record

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/plant"
)

// finishedRecord writes an old finished record at path.
func finishedRecord(t *testing.T, path string) {
	t.Helper()
	w, err := CreateRecord(path, testHold())
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	old := time.Now().Add(-60 * 24 * time.Hour)
	os.Chtimes(path, old, old)
}

func TestPruneNeverFollowsRecordsSymlink(t *testing.T) {
	res := t.TempDir()
	target := t.TempDir()
	finishedRecord(t, filepath.Join(target, "a.jsonl"))
	if err := os.Symlink(target, filepath.Join(res, "records")); err != nil {
		t.Fatal(err)
	}
	plant.Within(t, "PruneRecords", func() {
		err := PruneRecords(filepath.Join(res, "records"), os.Geteuid(), Retention{MaxAge: time.Hour})
		plant.Says(t, err, "pruning a symlinked records dir", filepath.Join(res, "records"), "symlink", ownUID())
	})
	if _, err := os.Stat(filepath.Join(target, "a.jsonl")); err != nil {
		t.Fatalf("pruning ran in the symlink's target: %v", err)
	}
}

func TestPruneSkipsSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "real.jsonl")
	finishedRecord(t, outside)
	os.Symlink(outside, filepath.Join(dir, "link.jsonl"))
	plant.FIFO(t, filepath.Join(dir, "fifo.jsonl"))
	if os.Geteuid() == 0 {
		plant.Device(t, filepath.Join(dir, "dev.jsonl"))
	}
	finishedRecord(t, filepath.Join(dir, "mine.jsonl"))
	plant.Within(t, "PruneRecords", func() {
		if err := PruneRecords(dir, os.Geteuid(), Retention{MaxAge: time.Hour}); err != nil {
			t.Fatal(err)
		}
	})
	for _, n := range []string{"link.jsonl", "fifo.jsonl"} {
		if _, err := os.Lstat(filepath.Join(dir, n)); err != nil {
			t.Fatalf("%s: %v (pruning removes only regular files)", n, err)
		}
	}
	if _, err := os.Stat(outside); err != nil {
		t.Fatalf("the symlink's target was pruned: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "mine.jsonl")); err == nil {
		t.Fatal("the old finished record was kept")
	}
}
