// record_create_test.go tests where a record may be made: a records dir
// or --dump directory that another user controls is refused, and a fresh
// record name is told from the usual one and from lookalikes.
package record

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/plant"
	"github.com/gpu-hold/gpu-hold/internal/testenv"
)

// A records dir another uid owns (made before any hold), or one its group
// may write without the sticky bit, is no place for a record.
func TestOpenRecordsDirRefusesAnotherUsers(t *testing.T) {
	testenv.NeedRoot(t, "a records dir owned by another uid (chown)")
	for _, c := range []struct {
		name string
		uid  int
		mode os.FileMode
		says []string
	}{
		{"another uid's", 4242, 0o777, []string{"belongs to uid 4242", "rm -r", "install -d -m 3775 -o root"}},
		{"root's, not sticky", 0, 0o775, []string{"not sticky", "chmod 3775"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := t.TempDir()
			p := filepath.Join(res, "records")
			os.Mkdir(p, 0o755)
			os.Chmod(p, c.mode)
			if err := os.Chown(p, c.uid, c.uid); err != nil {
				t.Fatal(err)
			}
			asUID(t, 4343) // neither root nor the dir's owner: mends nothing
			d, err := OpenRecordsDir(res, -1)
			if err == nil {
				d.Close()
			}
			var ue *UntrustedDirError
			if !errors.As(err, &ue) {
				t.Fatalf("OpenRecordsDir of %s records dir: %v, want an *UntrustedDirError", c.name, err)
			}
			plant.Says(t, err, c.name+" records dir", append([]string{p}, c.says...)...)
		})
	}
}

// A records dir of root, of this uid or of the resource dir's owner is
// used.
func TestOpenRecordsDirTrustsOwners(t *testing.T) {
	testenv.NeedRoot(t, "a records dir owned by another uid (chown)")
	res := t.TempDir()
	p := filepath.Join(res, "records")
	os.Mkdir(p, 0o755)
	os.Chown(p, 4242, 4242)
	unix.Chmod(p, RecordsDirMode) // os.Chmod takes Go's mode bits, not 03000
	os.Chown(res, 4242, 4242)
	asUID(t, 4343)
	d, err := OpenRecordsDir(res, -1)
	if err != nil {
		t.Fatalf("a records dir of the resource dir's owner: %v", err)
	}
	d.Close()
}

// --dump in a directory another uid owns is refused before anything is
// made; CheckDump says the same, and names a file already there.
func TestDumpDirOfAnotherUser(t *testing.T) {
	testenv.NeedRoot(t, "a directory owned by another uid (chown)")
	dir := filepath.Join(t.TempDir(), "theirs")
	os.Mkdir(dir, 0o777)
	os.Chmod(dir, 0o777)
	os.Chown(dir, 4242, 4242)
	asUID(t, 4343)
	path := filepath.Join(dir, "r.jsonl")
	_, err := CreateRecord(path, testHold())
	plant.Says(t, err, "--dump in another uid's dir", dir, "belongs to uid 4242", "--dump")
	plant.Says(t, CheckDump(path), "CheckDump in another uid's dir", dir, "belongs to uid 4242")
	if _, err := os.Lstat(path); err == nil {
		t.Fatal("a record was made in another uid's directory")
	}
	mine := t.TempDir()
	plant.FIFO(t, filepath.Join(mine, "r.jsonl"))
	plant.Says(t, CheckDump(filepath.Join(mine, "r.jsonl")), "CheckDump of a FIFO", "FIFO", "already exists")
	if err := CheckDump(filepath.Join(mine, "new.jsonl")); err != nil {
		t.Fatalf("CheckDump of a free name in a dir of ours: %v", err)
	}
}

func TestFreshRecordName(t *testing.T) {
	id := "20261201T223356-1f2e3d4c"
	a, b := FreshRecordName(id), FreshRecordName(id)
	if a == b || !IsFreshRecordName(a, id) || !IsFreshRecordName(b, id) {
		t.Fatalf("fresh names %q, %q for %s", a, b, id)
	}
	for _, n := range []string{id + ".jsonl", id + ".zzzzzzzz.jsonl", id + ".1234567.jsonl", id + "x.12345678.jsonl", "other." + a, a + ".jsonl", fmt.Sprintf("%s.12345678.json", id)} {
		if IsFreshRecordName(n, id) {
			t.Errorf("%q taken for a fresh record name of %s", n, id)
		}
	}
}
