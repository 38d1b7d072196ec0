// record_prune_test.go tests retention: finished records go by count and
// age; a record still written, or a dead holder's not yet reaped, stays.
package record

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestPruneRecords(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	finished := func(name string, age time.Duration) {
		p := filepath.Join(dir, name+".jsonl")
		w, err := CreateRecord(p, testHold())
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		os.Chtimes(p, now.Add(-age), now.Add(-age))
	}
	finished("new", time.Minute)
	finished("mid", time.Hour)
	finished("old", 48*time.Hour)
	finished("ancient", 30*24*time.Hour)
	// A holder that died: no end line, not locked. Old, but needed.
	dead, err := CreateRecord(filepath.Join(dir, "dead.jsonl"), testHold())
	if err != nil {
		t.Fatal(err)
	}
	dead.die()
	os.Chtimes(filepath.Join(dir, "dead.jsonl"), now.Add(-60*24*time.Hour), now.Add(-60*24*time.Hour))
	// A hold still writing.
	live, err := CreateRecord(filepath.Join(dir, "live.jsonl"), testHold())
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	os.Chtimes(filepath.Join(dir, "live.jsonl"), now.Add(-60*24*time.Hour), now.Add(-60*24*time.Hour))
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o644)

	left := func() []string {
		es, _ := os.ReadDir(dir)
		var n []string
		for _, e := range es {
			n = append(n, e.Name())
		}
		return n
	}
	if err := PruneRecords(dir, os.Geteuid(), Retention{MaxAge: 7 * 24 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	if got, want := left(), []string{"dead.jsonl", "live.jsonl", "mid.jsonl", "new.jsonl", "notes.txt", "old.jsonl"}; !slices.Equal(got, want) {
		t.Fatalf("after age 7d: %v, want %v", got, want)
	}
	if err := PruneRecords(dir, os.Geteuid(), Retention{Keep: 2}); err != nil {
		t.Fatal(err)
	}
	if got, want := left(), []string{"dead.jsonl", "live.jsonl", "mid.jsonl", "new.jsonl", "notes.txt"}; !slices.Equal(got, want) {
		t.Fatalf("after keep 2: %v, want %v", got, want)
	}
	if err := PruneRecords(filepath.Join(dir, "none"), os.Geteuid(), Retention{Keep: 1, MaxAge: time.Hour}); err != nil {
		t.Fatalf("missing dir: %v", err)
	}
}
