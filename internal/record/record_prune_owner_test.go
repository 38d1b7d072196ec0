// record_prune_owner_test.go tests whose records a retention removes: a
// job's (its own uid's, root's too) never another user's; the fleet's
// (EveryOwner) anyone's, and only as root.
package record

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/plant"
)

// ownedRecords writes, in dir, finished records owned by each uid in
// order, each an hour older than the one before (the first is newest),
// named "<i>-<uid>.jsonl".
func ownedRecords(t *testing.T, dir string, uids ...int) {
	t.Helper()
	now := time.Now()
	for i, uid := range uids {
		p := filepath.Join(dir, fmt.Sprintf("%c-%d.jsonl", 'a'+i, uid))
		finishedRecord(t, p)
		at := now.Add(-time.Duration(i+1) * time.Hour)
		os.Chtimes(p, at, at)
		if err := os.Chown(p, uid, uid); err != nil {
			t.Skipf("chown needs root here: %v", err)
		}
	}
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n []string
	for _, e := range es {
		n = append(n, e.Name())
	}
	return n
}

// Root's own retention (a root hold's --keep-records) counts and removes
// root's records only: the newest records, another user's, stay though
// they are beyond the count.
func TestRootOwnRetentionKeepsOthers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the records are chowned to several uids")
	}
	dir := t.TempDir()
	ownedRecords(t, dir, 4343, 0, 4343, 0, 0)
	if err := PruneRecords(dir, 0, Retention{Keep: 1}); err != nil {
		t.Fatal(err)
	}
	want := []string{"a-4343.jsonl", "b-0.jsonl", "c-4343.jsonl"}
	if got := names(t, dir); !slices.Equal(got, want) {
		t.Fatalf("after root's keep 1: %v, want %v (root's newest and every record of uid 4343)", got, want)
	}
	if err := PruneRecords(dir, 0, Retention{MaxAge: time.Minute}); err != nil {
		t.Fatal(err)
	}
	want = []string{"a-4343.jsonl", "c-4343.jsonl"}
	if got := names(t, dir); !slices.Equal(got, want) {
		t.Fatalf("after root's max age 1m: %v, want %v", got, want)
	}
}

// The fleet's retention removes every user's records, as root, keeping
// each user's newest: a user with many records (4343's, the newest) does
// not push another's older ones out.
func TestEveryOwnerRetention(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the records are chowned to several uids")
	}
	dir := t.TempDir()
	ownedRecords(t, dir, 4343, 4343, 4343, 0, 4344, 0, 0)
	if err := PruneRecords(dir, EveryOwner, Retention{Keep: 2}); err != nil {
		t.Fatal(err)
	}
	if got, want := names(t, dir), []string{"a-4343.jsonl", "b-4343.jsonl", "d-0.jsonl", "e-4344.jsonl", "f-0.jsonl"}; !slices.Equal(got, want) {
		t.Fatalf("after the fleet's keep 2: %v, want %v", got, want)
	}
}

// Only root applies the fleet's retention: a user asking for it is told so
// and removes nothing.
func TestEveryOwnerRefusedToUser(t *testing.T) {
	dir := t.TempDir()
	finishedRecord(t, filepath.Join(dir, "a.jsonl"))
	them := os.Geteuid() + 4000
	asUID(t, them)
	os.Chown(filepath.Join(dir, "a.jsonl"), them, -1)
	err := PruneRecords(dir, EveryOwner, Retention{Keep: 1, MaxAge: time.Minute})
	plant.Says(t, err, "a user pruning every user's records", dir, "only root")
	if got := names(t, dir); !slices.Equal(got, []string{"a.jsonl"}) {
		t.Fatalf("left %v, want a.jsonl", got)
	}
}
