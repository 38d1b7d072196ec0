// dir_unmade_test.go owns the test that a member of a shared queue dir who
// is neither root nor its owner makes no resource dir: one it made would be
// that member's, which every other user's hold (and root's) refuses.
package queue

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpu-hold/gpu-hold/internal/testenv"
)

// A member's hold on a resource with no dir in a root-owned fleet dir
// (03775, the member's group) is refused, creates nothing, and says what
// an admin runs; the dir root then makes, every member uses.
//
// Catches: the first member's hold making <dir>/<res>/ as its own, after
// which every other hold, root's too, refuses it (checkOwner).
func TestMemberMakesNoResourceDir(t *testing.T) {
	testenv.NeedRoot(t, "running a queue helper as another uid")
	base := groupDir(t, 0o3775)
	os.Chown(base, 0, dirTestUID) // the helper runs with gid dirTestUID: a member
	sharedExe(t)
	h := startHelper(t, "enqueue", base, "tpu", helperOpts{uid: dirTestUID, label: "first"})
	f := strings.Join(h.expect("err"), " ")
	for _, want := range []string{"install -d -m 3775 -o root -g 61001 " + filepath.Join(base, "tpu"), "reap --all", "uid 61001 made"} {
		if !strings.Contains(f, want) {
			t.Errorf("the member's refusal %q does not say %q", f, want)
		}
	}
	if _, err := os.Lstat(filepath.Join(base, "tpu")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the member's hold made %s/tpu (%v)", base, err)
	}
	openQ(t, base, "tpu") // root's open makes it, root's
	if st := lstatOf(t, filepath.Join(base, "tpu")); st.Uid != 0 || st.Mode&0o7777 != 0o3775 {
		t.Errorf("root's resource dir: uid %d mode %04o, want root's, 03775", st.Uid, st.Mode&0o7777)
	}
	m := startHelper(t, "enqueue", base, "tpu", helperOpts{uid: dirTestUID, label: "member"})
	m.seq("ticket")
	m.finish()
}
