// find_test.go tests finding a dead holder's cgroup by its hold id: only
// one its uid owns, under directories of root or that uid.
package cgroup

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gpu-hold/gpu-hold/internal/testenv"
)

func TestFind(t *testing.T) {
	testenv.NeedRoot(t, "making cgroups owned by several uids")
	mnt := Mount()
	if mnt == "" {
		testenv.Need(t, "no cgroup v2 mount")
	}
	top := filepath.Join(mnt, "gpu-hold-findtest-"+filepath.Base(t.TempDir()))
	mk := func(p string, uid int) string {
		if err := os.Mkdir(p, 0o755); err != nil {
			testenv.Need(t, "cannot make cgroup %s: %v", p, err)
		}
		t.Cleanup(func() { os.Remove(p) })
		if err := os.Chown(p, uid, uid); err != nil {
			t.Fatal(err)
		}
		return p
	}
	mk(top, 0)
	id := "20261201T223356-0a0b0c0d"
	rootCg := mk(filepath.Join(top, "gpu-hold-"+id), 0)
	deleg := mk(filepath.Join(top, "deleg"), 4242)
	userCg := mk(filepath.Join(deleg, "gpu-hold-"+id), 4242)
	other := mk(filepath.Join(top, "other"), 4343)
	// uid 4242's cgroup under uid 4343's directory (4343 made it
	// writable, or root chowned it): nothing another user made is entered.
	hidden := mk(filepath.Join(other, "gpu-hold-"+id), 4242)

	if got, _ := Find(id, 0); !slices.Contains(got, rootCg) || slices.Contains(got, userCg) || slices.Contains(got, hidden) {
		t.Errorf("Find(%s, root) = %v, want %s and none of uid 4242's", id, got, rootCg)
	}
	if got, _ := Find(id, 4242); !slices.Contains(got, userCg) || slices.Contains(got, rootCg) || slices.Contains(got, hidden) {
		t.Errorf("Find(%s, 4242) = %v, want %s alone (not root's, not one under uid 4343's dir)", id, got, userCg)
	}
	if got, _ := Find(id, 4343); len(got) != 0 {
		t.Errorf("Find(%s, 4343) = %v, want none", id, got)
	}
	for _, bad := range []string{"", "../x", "a/b"} {
		if got, _ := Find(bad, 0); len(got) != 0 {
			t.Errorf("Find(%q) = %v", bad, got)
		}
	}
}
