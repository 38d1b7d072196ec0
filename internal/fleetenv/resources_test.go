// resources_test.go owns the tests of what a queue dir knows: KnownResource
// lists every resource a read may show, and HoldResource lets a hold in a
// shared dir queue only for a declared one (built in, in a trusted
// resources.json, or a dir root or the queue dir's owner made), with
// "did you mean", while a private dir takes any valid name.
package fleetenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/testenv"
)

func TestKnownResource(t *testing.T) {
	d := t.TempDir()
	os.Mkdir(filepath.Join(d, "fpga"), 0o755)
	for _, ok := range []string{"gpu", "npu", "fpga"} {
		if err := KnownResource(d, ok); err != nil {
			t.Errorf("KnownResource(%s): %v", ok, err)
		}
	}
	err := KnownResource(d, "gpux")
	if err == nil || !strings.Contains(err.Error(), "known resources are fpga, gpu, npu") || !strings.Contains(err.Error(), `did you mean "gpu"?`) {
		t.Errorf("KnownResource(gpux): %v", err)
	}
}

// A private dir (its owner's alone) takes any valid name, as before; an
// invalid one is refused everywhere, with the name it resembles.
func TestHoldResourcePrivate(t *testing.T) {
	d := t.TempDir()
	for _, ok := range []string{"gpu", "gpus", "GPU", "mine"} {
		if err := HoldResource(d, ok); err != nil {
			t.Errorf("HoldResource(private, %q): %v", ok, err)
		}
	}
	for _, bad := range []string{"gpu ", "gpu/", "../gpu", ""} {
		err := HoldResource(d, bad)
		if err == nil || !strings.Contains(err.Error(), "is invalid") {
			t.Errorf("HoldResource(private, %q): %v, want invalid", bad, err)
		}
	}
	if err := HoldResource(d, "gpu "); err == nil || !strings.Contains(err.Error(), `did you mean "gpu"?`) {
		t.Errorf(`HoldResource("gpu "): %v, want a suggestion of gpu`, err)
	}
}

func TestHoldResourceShared(t *testing.T) {
	testenv.NeedRoot(t, "making a shared dir of another group and dirs of other uids")
	d := sharedTestDir(t, 0)
	mkOwned(t, filepath.Join(d, "fpga"), 0)          // an admin's
	mkOwned(t, filepath.Join(d, "gpus"), dirTestUID) // a user's hold made it (before the fix)
	writeOwned(t, filepath.Join(d, "resources.json"), 0, `{"tpu": {"devices": []}}`)
	for _, ok := range []string{"gpu", "npu", "fpga", "tpu"} {
		if err := HoldResource(d, ok); err != nil {
			t.Errorf("HoldResource(shared, %s): %v", ok, err)
		}
	}
	for _, c := range []struct{ name, suggest string }{{"gpus", "gpu"}, {"GPU", "gpu"}, {"Fpga", "fpga"}, {"nothing", ""}} {
		err := HoldResource(d, c.name)
		if err == nil {
			t.Errorf("HoldResource(shared, %s): nil, want not declared", c.name)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, "not declared") || !strings.Contains(msg, "declared resources are fpga, gpu, npu, tpu") {
			t.Errorf("HoldResource(shared, %s): %v: want it not declared, and the declared ones listed", c.name, msg)
		}
		if dym := `did you mean "` + c.suggest + `"?`; c.suggest != "" && !strings.Contains(msg, dym) || c.suggest == "" && strings.Contains(msg, "did you mean") {
			t.Errorf("HoldResource(shared, %s): %v: want suggestion %q", c.name, msg, c.suggest)
		}
	}
	if err := HoldResource(d, "gpus"); err == nil || !strings.Contains(err.Error(), "belongs to uid 61001") {
		t.Errorf("HoldResource(shared, gpus): %v: want it to say whose gpus/ is", err)
	}
}

// The queue dir's owner declares like root: the dirs it made count. A
// resources.json another user wrote declares nothing.
func TestHoldResourceSharedOwner(t *testing.T) {
	testenv.NeedRoot(t, "making a shared dir of another owner and files of other uids")
	d := sharedTestDir(t, dirTestUID)
	mkOwned(t, filepath.Join(d, "lab"), dirTestUID)
	mkOwned(t, filepath.Join(d, "theirs"), dirTestUID+1)
	writeOwned(t, filepath.Join(d, "resources.json"), dirTestUID+1, `{"planted": {"devices": []}}`)
	if err := HoldResource(d, "lab"); err != nil {
		t.Errorf("HoldResource(lab, made by the queue dir's owner): %v", err)
	}
	for _, bad := range []string{"theirs", "planted"} {
		if err := HoldResource(d, bad); err == nil || !strings.Contains(err.Error(), "not declared") {
			t.Errorf("HoldResource(%s): %v, want not declared", bad, err)
		}
	}
}

func TestSharedDir(t *testing.T) {
	for _, c := range []struct {
		dir  string
		mode uint32
		want bool
	}{{FleetDir, 0o755, true}, {FleetDir + "/", 0o700, true}, {"/x", 0o3775, true}, {"/x", 0o1777, true}, {"/x", 0o755, false}, {"/x", 0o700, false}} {
		if got := SharedDir(c.dir, unix.Stat_t{Mode: unix.S_IFDIR | c.mode}); got != c.want {
			t.Errorf("SharedDir(%s, %04o) = %v, want %v", c.dir, c.mode, got, c.want)
		}
	}
}

// sharedTestDir makes a queue dir as an admin makes a fleet dir, owned by
// uid, of group dirTestGID, mode 03775.
func sharedTestDir(t *testing.T, uid int) string {
	t.Helper()
	d := filepath.Join(t.TempDir(), "q")
	mkOwned(t, d, uid)
	if err := os.Chown(d, uid, dirTestGID); err != nil {
		t.Fatal(err)
	}
	if err := unix.Chmod(d, 0o3775); err != nil {
		t.Fatal(err)
	}
	return d
}

// mkOwned makes directory path, owned by uid.
func mkOwned(t *testing.T, path string, uid int) {
	t.Helper()
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, uid, dirTestGID); err != nil {
		t.Fatal(err)
	}
}

// writeOwned writes a file only its owner, uid, may write.
func writeOwned(t *testing.T, path string, uid int, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, uid, dirTestGID); err != nil {
		t.Fatal(err)
	}
}
