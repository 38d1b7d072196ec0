// record_hostile_test.go tests where the hold puts its record: records/ is
// never followed when it is a symlink, is made for the queue dir's group
// (03775) whatever the umask, and a second uid's hold writes its own record
// in a records dir root made.
package hold

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/plant"
)

// testRun is a hold on resource gpu in dir, as far as its record goes.
func testRun(dir, id string, log zerolog.Logger) *holdRun {
	h := &holdRun{o: Options{Dir: dir, Resource: "gpu", Log: log}, id: id, rec: &recorder{}}
	os.MkdirAll(filepath.Join(dir, "gpu"), 0o775)
	h.res.Record = recordPath(&h.o, id)
	return h
}

func TestRecordsDirSymlinkNeverFollowed(t *testing.T) {
	dir := t.TempDir()
	target := t.TempDir()
	h := testRun(dir, "h1", zerolog.Nop())
	if err := os.Symlink(target, filepath.Join(dir, "gpu", "records")); err != nil {
		t.Fatal(err)
	}
	var err error
	plant.Within(t, "recorder.open", func() { err = h.rec.open(h, h.queued) })
	if h.rec.p.Load() != nil {
		h.rec.close(&h.res, h.queued, h.o.Log)
		t.Error("a record was written through the symlinked records dir")
	}
	if es, _ := os.ReadDir(target); len(es) != 0 {
		t.Fatalf("the symlink's target got %d files", len(es))
	}
	plant.Says(t, err, "a hold whose records dir is a symlink", "records", "symlink", fmt.Sprintf("uid %d", os.Geteuid()), "does not run")
}

func TestRecordsDirMode(t *testing.T) {
	old := unix.Umask(0o022)
	defer unix.Umask(old)
	dir := plant.SharedDir(t)
	h := testRun(dir, "h1", zerolog.Nop())
	if err := h.rec.open(h, h.queued); err != nil {
		t.Fatal(err)
	}
	h.rec.close(&h.res, h.queued, h.o.Log)
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(dir, "gpu", "records"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Mode&0o7777 != 0o3775 || st.Gid != plant.SharedGID {
		t.Fatalf("records dir mode %04o group %d, want 3775 group %d", st.Mode&0o7777, st.Gid, plant.SharedGID)
	}
}

func init() {
	plant.Helpers["record"] = func(t *testing.T) {
		h := testRun(os.Getenv("QUEUE_DIR"), "h2", zerolog.New(os.Stderr))
		if err := h.rec.open(h, h.queued); err != nil {
			t.Fatal(err)
		}
		h.rec.close(&h.res, h.queued, h.o.Log)
	}
}

func TestRecordsDirTwoUsers(t *testing.T) {
	dir := plant.SharedDir(t)
	h := testRun(dir, "h1", zerolog.Nop())
	unix.Chmod(filepath.Join(dir, "gpu"), 0o3775)
	if err := h.rec.open(h, h.queued); err != nil {
		t.Fatal(err)
	}
	h.rec.close(&h.res, h.queued, h.o.Log)
	if out, err := plant.AsOther(t, "record", "QUEUE_DIR="+dir); err != nil {
		t.Fatalf("uid %d's hold wrote no record in the records dir root made: %v\n%s", plant.OtherUID, err, out)
	}
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(dir, "gpu", "records", "h2.jsonl"), &st); err != nil || st.Uid != plant.OtherUID {
		t.Fatalf("uid %d's record: %v, owner %d", plant.OtherUID, err, st.Uid)
	}
}

func init() {
	plant.Helpers["record-log"] = func(t *testing.T) {
		h := testRun(os.Getenv("QUEUE_DIR"), "h3", zerolog.New(os.Stdout))
		if err := h.rec.open(h, h.queued); err != nil {
			fmt.Println(err)
			return
		}
		h.rec.close(&h.res, h.queued, h.o.Log)
	}
}

// A records dir an older gpu-hold made 0755 as root: another uid's hold
// does not run, and its error says how to fix the dir.
func TestRecordsDirLegacyModeNamesTheFix(t *testing.T) {
	dir := plant.SharedDir(t)
	os.MkdirAll(filepath.Join(dir, "gpu", "records"), 0o755)
	unix.Chmod(filepath.Join(dir, "gpu"), 0o3775)
	os.Chmod(filepath.Join(dir, "gpu", "records"), 0o755)
	out, err := plant.AsOther(t, "record-log", "QUEUE_DIR="+dir)
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	if !strings.Contains(out, "chmod 3775 "+filepath.Join(dir, "gpu", "records")) {
		t.Fatalf("the warning does not say how to fix the records dir:\n%s", out)
	}
}
