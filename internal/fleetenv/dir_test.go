// dir_test.go owns the tests of the queue dir's choice and checks: FindDir
// creates nothing, hints name the dir's own group, and CheckQueueDir gives
// one fix per set-up problem.
package fleetenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/device"
	"github.com/gpu-hold/gpu-hold/internal/testenv"
)

// A gid no test host has, and a uid that is nobody's.
const (
	dirTestGID = 61000
	dirTestUID = 61001
)

func TestFindDirCreatesNothing(t *testing.T) {
	if _, err := os.Stat(FleetDir); err == nil {
		t.Skipf("skipped because %s exists on this host, so it, not the per-user state dir, is the default", FleetDir)
	}
	state := t.TempDir()
	t.Setenv("GPU_HOLD_DIR", "")
	t.Setenv("XDG_STATE_HOME", state)
	dir, err := FindDir("")
	if err != nil || dir != filepath.Join(state, "gpu-hold") {
		t.Fatalf("FindDir: %q, %v; want %s/gpu-hold", dir, err, state)
	}
	if _, err := os.Lstat(dir); err == nil {
		t.Errorf("FindDir created %s", dir)
	}
	if _, err := FindDir(filepath.Join(state, "missing")); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("FindDir of a missing --dir: %v", err)
	}
}

// The hint for a user locked out of a group-writable dir names the dir's
// own group, not a fixed one.
func TestAccessHintNamesTheGroup(t *testing.T) {
	testenv.NeedRoot(t, "giving a dir another group")
	d := t.TempDir()
	os.Chown(d, 0, dirTestGID)
	unix.Chmod(d, 0o3775)
	if h := accessHint(d); !strings.Contains(h, "group 61000") {
		t.Errorf("hint %q does not name group 61000", h)
	}
	os.Chown(d, 0, 0)
	if h := accessHint(d); !strings.Contains(h, "group root") {
		t.Errorf("hint %q does not name group root", h)
	}
	unix.Chmod(d, 0o755)
	if h := accessHint(d); strings.Contains(h, "add you to group") {
		t.Errorf("hint %q: joining a group cannot help with a dir its group cannot write", h)
	}
}

// dirProblems maps each problem's path to its fixes.
func dirProblems(r DirReport) map[string][]string {
	m := map[string][]string{}
	for _, p := range r.Problems {
		m[p.Path] = append(m[p.Path], p.Fix)
	}
	return m
}

func TestCheckQueueDir(t *testing.T) {
	testenv.NeedRoot(t, "making a fleet dir of another group and files of another uid")
	d := t.TempDir()
	os.Chown(d, 0, dirTestGID)
	unix.Chmod(d, 0o3775)
	gpu := filepath.Join(d, "gpu")
	for _, p := range []string{gpu, filepath.Join(gpu, "records")} {
		os.Mkdir(p, 0o755)
		os.Chown(p, 0, dirTestGID)
		unix.Chmod(p, 0o3775)
	}
	for _, f := range []string{"seq", "token"} {
		os.WriteFile(filepath.Join(gpu, f), nil, 0o664)
		os.Chown(filepath.Join(gpu, f), dirTestUID, dirTestGID)
		unix.Chmod(filepath.Join(gpu, f), 0o664)
	}
	if r := CheckQueueDir(d, []string{"gpu"}); !r.Fleet || r.Group != "61000" || len(r.Problems) != 0 {
		t.Fatalf("a fleet dir set up right: %+v", r)
	}

	unix.Chmod(d, 0o2775)
	os.Chown(gpu, dirTestUID, dirTestGID)
	unix.Chmod(filepath.Join(gpu, "seq"), 0o644)
	os.Link(filepath.Join(gpu, "seq"), filepath.Join(d, "seq-link"))
	os.WriteFile(filepath.Join(d, device.ResourcesFile), []byte("{}"), 0o666)
	os.Chown(filepath.Join(d, device.ResourcesFile), dirTestUID, dirTestGID)
	unix.Chmod(filepath.Join(d, device.ResourcesFile), 0o666)
	os.Symlink("/etc", filepath.Join(d, "npu"))
	got := dirProblems(CheckQueueDir(d, []string{"gpu", "fpga"}))
	want := map[string][]string{
		d:                                      {"chmod 3775 " + d},
		gpu:                                    {"chown root " + gpu},
		filepath.Join(gpu, "seq"):              {"rm " + filepath.Join(gpu, "seq") + " (the next hold makes it anew)", "chmod g+w " + filepath.Join(gpu, "seq")},
		filepath.Join(d, device.ResourcesFile): {"chown root: " + filepath.Join(d, device.ResourcesFile), "chmod 644 " + filepath.Join(d, device.ResourcesFile)},
		filepath.Join(d, "npu"):                {"rm " + filepath.Join(d, "npu")},
		filepath.Join(d, "fpga"):               {"install -d -m 3775 -o root -g 61000 " + filepath.Join(d, "fpga") + " " + filepath.Join(d, "fpga", "records")},
	}
	for p, fixes := range want {
		if strings.Join(got[p], "|") != strings.Join(fixes, "|") {
			t.Errorf("%s: fixes %q, want %q", p, got[p], fixes)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("unexpected problem at %s: %q", p, got[p])
		}
	}
}

// A private dir has nothing to set up.
func TestCheckQueueDirPrivate(t *testing.T) {
	d := t.TempDir()
	unix.Chmod(d, 0o700)
	os.Mkdir(filepath.Join(d, "gpu"), 0o700)
	if r := CheckQueueDir(d, []string{"gpu", "npu"}); r.Fleet || len(r.Problems) != 0 {
		t.Errorf("private dir: %+v", r)
	}
}
