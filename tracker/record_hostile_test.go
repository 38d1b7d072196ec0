// record_hostile_test.go tests the record files against what another user
// can plant in a shared records directory: a symlink, a FIFO, a device
// node, a hard link. Nothing blocks, nothing is followed, nothing outside
// the directory is written, and the error says what the file is.
package tracker

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/testenv"
)

// within runs fn and fails the test when it takes longer than 5 s (a FIFO
// opened without O_NONBLOCK blocks for ever).
func within(t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s blocked for 5 s (a FIFO opened without O_NONBLOCK?)", what)
	}
}

func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := unix.Mkfifo(path, 0o666); err != nil {
		t.Fatal(err)
	}
}

// mknull makes a character device node like /dev/null at path (root only).
func mknull(t *testing.T, path string) {
	t.Helper()
	testenv.NeedRoot(t, "making a device node (mknod)")
	if err := unix.Mknod(path, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatal(err)
	}
}

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

func wantErr(t *testing.T, err error, what string, subs ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error", what)
	}
	for _, s := range subs {
		if !strings.Contains(err.Error(), s) {
			t.Fatalf("%s: error %q does not say %q", what, err, s)
		}
	}
}

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
	mkfifo(t, fifo)
	for _, c := range []struct{ path, kind string }{{link, "symlink"}, {fifo, "FIFO"}} {
		within(t, "ReadRecord of a "+c.kind, func() {
			_, err := ReadRecord(c.path)
			wantErr(t, err, "ReadRecord of a "+c.kind, c.path, c.kind, ownUID())
		})
	}
}

func TestReadRecordRefusesDevice(t *testing.T) {
	dev := filepath.Join(t.TempDir(), "dev.jsonl")
	mknull(t, dev)
	within(t, "ReadRecord of a device", func() {
		_, err := ReadRecord(dev)
		wantErr(t, err, "ReadRecord of a device node", dev, "device")
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
	mkfifo(t, fifo)
	for _, c := range []struct{ path, says string }{{link, "symlink"}, {hard, "hard link"}, {fifo, "FIFO"}} {
		within(t, "AppendRecord of a "+c.says, func() {
			w, err := AppendRecord(c.path)
			if err == nil {
				w.Reap(ReapInfo{By: idRoot})
				w.Close()
			}
			wantErr(t, err, "AppendRecord of a "+c.says, c.path, c.says)
		})
	}
	unchanged(t, outside, want)
}

func TestAppendRecordDevice(t *testing.T) {
	dev := filepath.Join(t.TempDir(), "dev.jsonl")
	mknull(t, dev)
	within(t, "AppendRecord of a device", func() {
		_, err := AppendRecord(dev)
		wantErr(t, err, "AppendRecord of a device node", dev, "device")
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
	mkfifo(t, fifo)
	for _, c := range []struct{ path, kind string }{{link, "symlink"}, {dangling, "symlink"}, {fifo, "FIFO"}} {
		within(t, "CreateRecord over a "+c.kind, func() {
			w, err := CreateRecord(c.path, testHold())
			if err == nil {
				w.Close()
			}
			wantErr(t, err, "CreateRecord over a "+c.kind, c.path, c.kind, ownUID())
		})
	}
	unchanged(t, outside, []byte("keep"))
	if _, err := os.Lstat(filepath.Join(dir, "nowhere")); err == nil {
		t.Fatal("a dangling symlink's target was created")
	}
}

func TestCreateRecordOverDevice(t *testing.T) {
	dev := filepath.Join(t.TempDir(), "dev.jsonl")
	mknull(t, dev)
	within(t, "CreateRecord over a device", func() {
		_, err := CreateRecord(dev, testHold())
		wantErr(t, err, "CreateRecord over a device node", dev, "device")
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
		wantErr(t, err, "CreateRecord under a planted dir symlink", link, "symlink owned by uid 4242", "never followed")
	}
	if es, _ := os.ReadDir(target); len(es) != 0 {
		t.Fatal("something was made in the planted symlink's target")
	}
}
