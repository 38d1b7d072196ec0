// other.go owns running a piece of a test as another user of a shared
// directory: that user's uid and group, the shared directory, and the
// entry point the test binary re-runs as that uid.
package plant

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/testenv"
)

// Another user of a shared directory, as the tests make it: a uid and a
// group no account on the host uses.
const (
	OtherUID  = 4242
	SharedGID = 4243
)

// SharedDir makes a fleet-style directory (root's, group SharedGID, mode
// 03775: setgid, sticky, group-writable) whose parents another uid can
// traverse.
func SharedDir(t *testing.T) string {
	t.Helper()
	testenv.NeedRoot(t, "a directory shared by two uids")
	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o755)
	if err := os.Chown(dir, 0, SharedGID); err != nil {
		t.Fatal(err)
	}
	if err := unix.Chmod(dir, 0o3775); err != nil { // os.Chmod drops 0o3000
		t.Fatal(err)
	}
	return dir
}

// helperEnv names the piece of a test the test binary runs as another uid.
const helperEnv = "GPU_HOLD_TEST_HELPER"

// AsOther runs this test binary's helper named what as OtherUID (group
// SharedGID), with args in its environment, and returns its output. The
// test package must have a TestHelperAsOther that calls RunHelper.
func AsOther(t *testing.T, what string, env ...string) (string, error) {
	t.Helper()
	testenv.NeedRoot(t, "running a helper as another uid")
	// The go tool builds the test binary in a directory only we can enter.
	bin := filepath.Join(t.TempDir(), filepath.Base(os.Args[0]))
	os.Chmod(filepath.Dir(bin), 0o755)
	os.Chmod(filepath.Dir(filepath.Dir(bin)), 0o755)
	copyFile(t, os.Args[0], bin)
	cmd := exec.Command(bin, "-test.run=^TestHelperAsOther$", "-test.v")
	cmd.Env = append(os.Environ(), append(env, helperEnv+"="+what)...)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: OtherUID, Gid: SharedGID, Groups: []uint32{SharedGID}}}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// Helpers are the pieces AsOther runs, by name; a test registers its own.
var Helpers = map[string]func(t *testing.T){}

// RunHelper is the body of a package's TestHelperAsOther, which is not a
// test of its own: it runs the helper AsOther names, in the process AsOther
// started as another uid.
func RunHelper(t *testing.T) {
	what := os.Getenv(helperEnv)
	if what == "" {
		return // an entry point for AsOther, nothing to test by itself
	}
	fn := Helpers[what]
	if fn == nil {
		t.Fatalf("no helper %q", what)
	}
	fn(t)
}
