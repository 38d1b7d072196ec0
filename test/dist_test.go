// dist_test.go owns the check of the shipped guard unit: systemd-analyze
// verify passes on it, in a scratch root that has the binary where the
// unit runs it and the host's own system units.
package test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/gpu-hold/gpu-hold/internal/testenv"
)

func TestGuardUnitVerifies(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		testenv.Need(t, "no systemd-analyze to verify dist/systemd/gpu-hold-guard.service: %v", err)
	}
	root := t.TempDir()
	for _, d := range []string{"usr/local/bin", "etc/systemd/system", "usr/lib/systemd"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cp := func(args ...string) {
		if out, err := exec.Command("cp", args...).CombinedOutput(); err != nil {
			t.Fatalf("cp %v: %v\n%s", args, err, out)
		}
	}
	cp(bin, filepath.Join(root, "usr/local/bin/gpu-hold"))
	cp("../dist/systemd/gpu-hold-guard.service", filepath.Join(root, "etc/systemd/system/"))
	cp("-r", "/usr/lib/systemd/system", filepath.Join(root, "usr/lib/systemd/"))
	out, err := exec.Command(sa, "verify", "--root="+root, "/etc/systemd/system/gpu-hold-guard.service").CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify gpu-hold-guard.service: %v\n%s", err, out)
	}
}
