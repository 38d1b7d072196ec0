// record_hostile_test.go tests the record files against what another user
// can plant in a shared records directory: a symlink, a FIFO, a device
// node, a hard link. Nothing blocks, nothing is followed, nothing outside
// the directory is written, and the error says what the file is.
package record

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/plant"
	"github.com/gpu-hold/gpu-hold/internal/testenv"
)

// deadRecord writes a record whose holder died (no end line) at path.
func deadRecord(t *testing.T, path string) []byte {
	t.Helper()
	w, err := CreateRecord(path, testHold())
	if err != nil {
		t.Fatal(err)
	}
	w.Event(Event{Kind: Fork, Time: at(0), Ident: idRoot, PPID: 500, PGID: 1000, SID: 900})
	w.die()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ownUID is how an error names a file this test made.
func ownUID() string { return fmt.Sprintf("uid %d", os.Geteuid()) }

func unchanged(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("%s was changed through a planted file", path)
	}
}

func TestReadRecordRefusesSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "real.jsonl")
	deadRecord(t, outside)
	link := filepath.Join(dir, "link.jsonl")
	os.Symlink(outside, link)
	fifo := filepath.Join(dir, "fifo.jsonl")
	plant.FIFO(t, fifo)
	for _, c := range []struct{ path, kind string }{{link, "symlink"}, {fifo, "FIFO"}} {
		plant.Within(t, "ReadRecord of a "+c.kind, func() {
			_, err := ReadRecord(c.path)
			plant.Says(t, err, "ReadRecord of a "+c.kind, c.path, c.kind, ownUID())
		})
	}
}

func TestReadRecordRefusesDevice(t *testing.T) {
	dev := filepath.Join(t.TempDir(), "dev.jsonl")
	plant.Device(t, dev)
	plant.Within(t, "ReadRecord of a device", func() {
		_, err := ReadRecord(dev)
		plant.Says(t, err, "ReadRecord of a device node", dev, "device")
	})
}

func TestAppendRecordRefusesPlantedFiles(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "real.jsonl")
	want := deadRecord(t, outside)
	link := filepath.Join(dir, "link.jsonl")
	os.Symlink(outside, link)
	hard := filepath.Join(dir, "hard.jsonl")
	if err := os.Link(outside, hard); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo.jsonl")
	plant.FIFO(t, fifo)
	for _, c := range []struct{ path, says string }{{link, "symlink"}, {hard, "hard link"}, {fifo, "FIFO"}} {
		plant.Within(t, "AppendRecord of a "+c.says, func() {
			w, err := AppendRecord(c.path)
			if err == nil {
				w.Reap(ReapInfo{By: idRoot})
				w.Close()
			}
			plant.Says(t, err, "AppendRecord of a "+c.says, c.path, c.says)
		})
	}
	unchanged(t, outside, want)
}

func TestAppendRecordDevice(t *testing.T) {
	dev := filepath.Join(t.TempDir(), "dev.jsonl")
	plant.Device(t, dev)
	plant.Within(t, "AppendRecord of a device", func() {
		_, err := AppendRecord(dev)
		plant.Says(t, err, "AppendRecord of a device node", dev, "device")
	})
}

// The record is the holder's: nobody else may rewrite it.
func TestCreateRecordMode(t *testing.T) {
	old := unix.Umask(0o077)
	defer unix.Umask(old)
	path := filepath.Join(t.TempDir(), "r.jsonl")
	w, err := CreateRecord(path, testHold())
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	fi, _ := os.Stat(path)
	if fi.Mode().Perm() != 0o644 {
		t.Fatalf("record mode %v, want 0644", fi.Mode().Perm())
	}
}

// --dump names a path the caller chose, maybe in /tmp: whatever is there
// already is reported and never truncated or followed.
func TestCreateRecordExistingPath(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(outside, []byte("keep"), 0o644)
	link := filepath.Join(dir, "link.jsonl")
	os.Symlink(outside, link)
	dangling := filepath.Join(dir, "dangling.jsonl")
	os.Symlink(filepath.Join(dir, "nowhere"), dangling)
	fifo := filepath.Join(dir, "fifo.jsonl")
	plant.FIFO(t, fifo)
	for _, c := range []struct{ path, kind string }{{link, "symlink"}, {dangling, "symlink"}, {fifo, "FIFO"}} {
		plant.Within(t, "CreateRecord over a "+c.kind, func() {
			w, err := CreateRecord(c.path, testHold())
			if err == nil {
				w.Close()
			}
			plant.Says(t, err, "CreateRecord over a "+c.kind, c.path, c.kind, ownUID())
		})
	}
	unchanged(t, outside, []byte("keep"))
	if _, err := os.Lstat(filepath.Join(dir, "nowhere")); err == nil {
		t.Fatal("a dangling symlink's target was created")
	}
}

func TestCreateRecordOverDevice(t *testing.T) {
	dev := filepath.Join(t.TempDir(), "dev.jsonl")
	plant.Device(t, dev)
	plant.Within(t, "CreateRecord over a device", func() {
		_, err := CreateRecord(dev, testHold())
		plant.Says(t, err, "CreateRecord over a device node", dev, "device")
	})
}

// --dump under a directory symlink another user planted: never followed,
// nothing made in its target.
func TestCreateRecordUnderPlantedDirLink(t *testing.T) {
	testenv.NeedRoot(t, "a symlink owned by another uid (lchown)")
	target := t.TempDir()
	link := filepath.Join(t.TempDir(), "dumps")
	os.Symlink(target, link)
	if err := os.Lchown(link, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(link, "d.jsonl"), filepath.Join(link, "sub", "d.jsonl")} {
		_, err := CreateRecord(p, testHold())
		plant.Says(t, err, "CreateRecord under a planted dir symlink", link, "symlink owned by uid 4242", "never followed")
	}
	if es, _ := os.ReadDir(target); len(es) != 0 {
		t.Fatal("something was made in the planted symlink's target")
	}
}
