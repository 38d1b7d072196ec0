// dir_test.go owns the tests of opening a resource directory: read-only
// opens that create nothing, the modes and group of a resource directory the
// queue creates in a shared dir, and the refusal of one another user owns.
package queue

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/testenv"
)

// Numeric ids no test host has: nobody else can own what the tests make.
const (
	dirTestGID  = 61000
	dirTestUID  = 61001
	dirTestUID2 = 61002
)

// groupDir makes a root-owned fleet-style dir of group dirTestGID with mode.
func groupDir(t *testing.T, mode uint32) string {
	t.Helper()
	testenv.NeedRoot(t, "giving a queue dir another group and chowning a resource dir to another uid")
	d, err := os.MkdirTemp("", "gpu-hold-queue-fleet-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chown(d, 0, dirTestGID); err != nil {
		t.Fatal(err)
	}
	if err := unix.Chmod(d, mode); err != nil {
		t.Fatal(err)
	}
	return d
}

func lstatOf(t *testing.T, path string) unix.Stat_t {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// underUmask runs the test body under umask m (no queue test runs in
// parallel, so the process-wide umask is the test's own).
func underUmask(t *testing.T, m int) {
	old := unix.Umask(m)
	t.Cleanup(func() { unix.Umask(old) })
}

// A resource dir the queue creates in a setgid group-writable dir gets
// that dir's group and exactly 03775, whatever the umask: a umask of 077
// must not lock the group out of a fleet dir.
func TestCreatedResourceDirShared(t *testing.T) {
	base := groupDir(t, 0o2775)
	underUmask(t, 0o077)
	q := openQ(t, base, "gpu")
	st := lstatOf(t, q.path)
	if st.Mode&0o7777 != 0o3775 || st.Gid != dirTestGID || st.Uid != 0 {
		t.Errorf("resource dir created in a 02775 dir of group %d: mode %04o uid %d gid %d, want 03775 root:%d",
			dirTestGID, st.Mode&0o7777, st.Uid, st.Gid, dirTestGID)
	}
}

// Without setgid on the base, the queue gives the new dir the base's group
// itself (root may; a member may too).
func TestCreatedResourceDirGroupWithoutSetgid(t *testing.T) {
	base := groupDir(t, 0o1775)
	q := openQ(t, base, "gpu")
	st := lstatOf(t, q.path)
	if st.Mode&0o7777 != 0o3775 || st.Gid != dirTestGID {
		t.Errorf("resource dir created in a 01775 dir of group %d: mode %04o gid %d, want 03775 gid %d",
			dirTestGID, st.Mode&0o7777, st.Gid, dirTestGID)
	}
}

// A private base keeps private resource dirs: nobody else may write.
func TestCreatedResourceDirPrivate(t *testing.T) {
	base := t.TempDir()
	unix.Chmod(base, 0o700)
	underUmask(t, 0o022)
	q := openQ(t, base, "gpu")
	st := lstatOf(t, q.path)
	if st.Mode&0o022 != 0 || st.Mode&unix.S_ISGID != 0 {
		t.Errorf("resource dir in a 0700 dir: mode %04o, want no group or other write, no setgid", st.Mode&0o7777)
	}
}

// The non-root owner of a shared queue dir creating the resource dir gets
// 03775 too, even under umask 077 (the kernel alone would give 02700). (A
// member who is not its owner makes none: dir_unmade_test.go.)
func TestCreatedResourceDirSharedByUser(t *testing.T) {
	testenv.NeedRoot(t, "running a queue helper as another uid")
	d, err := os.MkdirTemp("", "gpu-hold-queue-fleet-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	os.Chown(d, dirTestUID, dirTestUID) // the helper's own, and its group
	unix.Chmod(d, 0o2775)
	sharedExe(t) // copied before the umask changes, so other uids may run it
	underUmask(t, 0o077)
	h := startHelper(t, "enqueue", d, "gpu", helperOpts{uid: dirTestUID, label: "creator"})
	h.seq("ticket")
	h.finish()
	st := lstatOf(t, filepath.Join(d, "gpu"))
	if st.Mode&0o7777 != 0o3775 || st.Gid != dirTestUID {
		t.Errorf("resource dir a member created under umask 077: mode %04o gid %d, want 03775 gid %d", st.Mode&0o7777, st.Gid, dirTestUID)
	}
}

// A resource dir another non-root user owns in a shared dir is refused: its
// owner could delete or forge anything in it. The error says who owns it
// and what an admin runs.
func TestUntrustedResourceDirRefused(t *testing.T) {
	base := groupDir(t, 0o3775)
	res := filepath.Join(base, "gpu")
	if err := os.Mkdir(res, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chown(res, dirTestUID, dirTestGID)
	unix.Chmod(res, 0o3775)
	_, err := OpenDir(base, "gpu", DirOptions{})
	if err == nil {
		t.Fatalf("a hold opened %s, owned by uid %d, in a shared dir", res, dirTestUID)
	}
	for _, want := range []string{"61001", "chown root:61000 " + res, "chmod 3775 " + res, "rm -r " + res} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
	// Owned by root, it is fine.
	os.Chown(res, 0, dirTestGID)
	openQ(t, base, "gpu")
}

// The owner of a resource dir may use it: a user's own dir is no threat to
// that user. Another user's hold refuses it.
func TestOwnResourceDirAcceptedOthersRefused(t *testing.T) {
	testenv.NeedRoot(t, "running queue helpers as other uids")
	base := groupDir(t, 0o1777) // helpers are not members of dirTestGID: world-writable, sticky
	res := filepath.Join(base, "gpu")
	os.Mkdir(res, 0o755)
	os.Chown(res, dirTestUID, dirTestUID)
	unix.Chmod(res, 0o1777)
	h := startHelper(t, "enqueue", base, "gpu", helperOpts{uid: dirTestUID, label: "owner"})
	h.seq("ticket")
	h.finish()
	h2 := startHelper(t, "enqueue", base, "gpu", helperOpts{uid: dirTestUID2, label: "other"})
	if f := h2.expect("err"); !strings.Contains(strings.Join(f, " "), "61001") {
		t.Errorf("uid %d's refusal does not name the owner: %v", dirTestUID2, f)
	}
}

// A read-only open of a resource that has no directory creates nothing,
// neither the resource dir nor the queue dir, and says so with
// ErrNoResource.
func TestNoCreateCreatesNothing(t *testing.T) {
	base := t.TempDir()
	_, err := OpenDir(base, "gpux", DirOptions{NoCreate: true})
	if !errors.Is(err, ErrNoResource) {
		t.Errorf("read-only open of a missing resource: %v, want ErrNoResource", err)
	}
	if _, err := os.Lstat(filepath.Join(base, "gpux")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("read-only open created %s/gpux (%v)", base, err)
	}
	missing := filepath.Join(base, "state", "gpu-hold")
	if _, err := OpenDir(missing, "gpu", DirOptions{NoCreate: true}); !errors.Is(err, ErrNoResource) {
		t.Errorf("read-only open in a missing queue dir: %v, want ErrNoResource", err)
	}
	if _, err := os.Lstat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("read-only open created the queue dir %s (%v)", missing, err)
	}
	// An existing one opens; a hold's open still creates.
	openQ(t, base, "gpu")
	q, err := OpenDir(base, "gpu", DirOptions{NoCreate: true})
	if err != nil {
		t.Fatalf("read-only open of an existing resource: %v", err)
	}
	if st, err := q.Status(); err != nil || st.Holder != nil {
		t.Errorf("status: %+v, %v", st, err)
	}
	q.(*dirQueue).Close()
}

// A read-only open of an untrusted resource dir warns instead of refusing:
// `gpu-hold queue` still shows it, and says whose it is.
func TestNoCreateWarnsUntrusted(t *testing.T) {
	base := groupDir(t, 0o3775)
	res := filepath.Join(base, "gpu")
	os.Mkdir(res, 0o755)
	os.Chown(res, dirTestUID, dirTestGID)
	unix.Chmod(res, 0o3775)
	var warns []string
	q, err := OpenDir(base, "gpu", DirOptions{NoCreate: true, Warn: func(m string) { warns = append(warns, m) }})
	if err != nil {
		t.Fatalf("read-only open of an untrusted dir: %v", err)
	}
	q.(*dirQueue).Close()
	if len(warns) != 1 || !strings.Contains(warns[0], "61001") {
		t.Errorf("warnings %q, want one that names uid 61001", warns)
	}
}

// ListResources names the real resource dirs only: no symlink, file or
// invalid name.
func TestListResources(t *testing.T) {
	base := t.TempDir()
	for _, d := range []string{"gpu", "npu0", ".hidden"} {
		os.Mkdir(filepath.Join(base, d), 0o755)
	}
	os.Symlink(t.TempDir(), filepath.Join(base, "link"))
	os.WriteFile(filepath.Join(base, "resources.json"), []byte("{}"), 0o644)
	got, err := ListResources(base)
	if err != nil || !slices.Equal(got, []string{"gpu", "npu0"}) {
		t.Errorf("ListResources: %q, %v; want [gpu npu0]", got, err)
	}
	if got, err := ListResources(filepath.Join(base, "missing")); err != nil || len(got) != 0 {
		t.Errorf("ListResources of a missing dir: %q, %v; want none, no error", got, err)
	}
}

// GroupName names a gid from the group database, else prints the number.
func TestGroupName(t *testing.T) {
	if got := GroupName(0); got != "root" {
		t.Errorf("GroupName(0) = %q, want root", got)
	}
	if got := GroupName(dirTestGID); got != "61000" {
		t.Errorf("GroupName(%d) = %q, want the number", dirTestGID, got)
	}
}

// A hold that finds the resource dir another hold has just made (still
// 0700, before its group and mode are set) waits a moment instead of
// failing with "not readable".
func TestOpenWaitsForCreatorsMode(t *testing.T) {
	testenv.NeedRoot(t, "running a queue helper as another uid")
	base := groupDir(t, 0o1777) // the helper is no member of dirTestGID
	res := filepath.Join(base, "gpu")
	if err := os.Mkdir(res, 0o700); err != nil {
		t.Fatal(err)
	}
	h := startHelper(t, "enqueue", base, "gpu", helperOpts{uid: dirTestUID, label: "early"})
	time.Sleep(50 * time.Millisecond)
	unix.Chmod(res, 0o3777)
	h.seq("ticket")
	h.finish()
}
