// record_owner_test.go tests that a record is its holder's: the reader
// says whose file it read, only the owner (or root) appends to it or prunes
// it, and the records dir is never followed and is made for the group.
package record

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/plant"
	"github.com/gpu-hold/gpu-hold/internal/safefs"
)

// asUID makes the tracker believe its euid is uid for the rest of the test.
func asUID(t *testing.T, uid int) {
	old := geteuid
	geteuid = func() int { return uid }
	t.Cleanup(func() { geteuid = old })
}

// The reader tells the caller whose file the record is, from the open it
// read (hold/reap.go trusts a record only from the dead holder's uid).
func TestReadRecordFileInfo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.jsonl")
	deadRecord(t, path)
	rec, err := ReadRecord(path)
	if err != nil {
		t.Fatal(err)
	}
	if rec.File.UID != uint32(os.Geteuid()) || rec.File.Nlink != 1 || rec.File.Perm() != 0o644 || rec.File.WritableByOthers() {
		t.Fatalf("record file info: %+v", rec.File)
	}
}

// An appender that is neither the record's owner nor root does not write
// another user's evidence.
func TestAppendRecordNotOwner(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.jsonl")
	want := deadRecord(t, path)
	them := 4242
	if os.Geteuid() == them {
		them++
	}
	asUID(t, them)
	_, err := AppendRecord(path)
	plant.Says(t, err, "AppendRecord by another uid", path, fmt.Sprintf("uid %d", them), "owned by uid")
	unchanged(t, path, want)
}

// A non-root pruner removes its own old records only.
func TestPruneOnlyOwnRecords(t *testing.T) {
	dir := t.TempDir()
	finishedRecord(t, filepath.Join(dir, "mine.jsonl"))
	finishedRecord(t, filepath.Join(dir, "theirs.jsonl"))
	if err := os.Chown(filepath.Join(dir, "theirs.jsonl"), 4343, 4343); err != nil {
		t.Skipf("chown needs root here: %v", err)
	}
	asUID(t, os.Geteuid()+4000)
	os.Chown(filepath.Join(dir, "mine.jsonl"), os.Geteuid()+4000, -1)
	if err := PruneRecords(dir, geteuid(), Retention{MaxAge: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "theirs.jsonl")); err != nil {
		t.Fatalf("another user's record was pruned: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "mine.jsonl")); err == nil {
		t.Fatal("the pruner's own old record was kept")
	}
}

func TestOpenRecordsDirRefusesPlanted(t *testing.T) {
	for _, kind := range []string{"symlink", "FIFO", "regular file"} {
		t.Run(kind, func(t *testing.T) {
			res := t.TempDir()
			target := t.TempDir()
			p := filepath.Join(res, "records")
			switch kind {
			case "symlink":
				os.Symlink(target, p)
			case "FIFO":
				plant.FIFO(t, p)
			default:
				os.WriteFile(p, nil, 0o644)
			}
			plant.Within(t, "OpenRecordsDir", func() {
				d, err := OpenRecordsDir(res, -1)
				if err == nil {
					d.Close()
				}
				plant.Says(t, err, "records dir that is a "+kind, p, kind, ownUID(), "install -d -m 3775")
			})
			if es, _ := os.ReadDir(target); len(es) != 0 {
				t.Fatal("something was written in the symlink's target")
			}
		})
	}
}

// The records dir is made 03775 whatever the umask; one of ours with the
// mode an older gpu-hold gave it (0755 by umask) is mended.
func TestOpenRecordsDirMode(t *testing.T) {
	old := unix.Umask(0o077)
	defer unix.Umask(old)
	for _, pre := range []bool{false, true} {
		res := t.TempDir()
		gid := os.Getegid()
		if pre {
			os.Mkdir(filepath.Join(res, "records"), 0o755)
			if os.Geteuid() == 0 {
				gid = 4243 // root may give it the queue's group
			}
		}
		d, err := OpenRecordsDir(res, gid)
		if err != nil {
			t.Fatal(err)
		}
		w, err := CreateRecordAt(d, "h.jsonl", testHold())
		if err != nil {
			t.Fatal(err)
		}
		w.Close()
		d.Close()
		var st unix.Stat_t
		unix.Lstat(filepath.Join(res, "records"), &st)
		if st.Mode&0o7777 != RecordsDirMode || int(st.Gid) != gid {
			t.Fatalf("records dir (existing before: %v) mode %04o group %d, want %04o group %d", pre, st.Mode&0o7777, st.Gid, RecordsDirMode, gid)
		}
	}
}

// recordFinishedAt is recordFinished for the record at path.
func recordFinishedAt(t *testing.T, path string) (bool, error) {
	d, err := safefs.OpenDir(filepath.Dir(path))
	if err != nil {
		return false, err
	}
	defer d.Close()
	st, err := d.Lstat(filepath.Base(path))
	if err != nil {
		return false, err
	}
	return recordFinished(d, prunable{filepath.Base(path), st})
}
