// kernel_floor_test.go owns the test of the eBPF tracker's kernel floor
// (tracker.KernelFloor, 5.11): below it, under the usual RLIMIT_MEMLOCK,
// --track=bpf refuses with the floor as its reason and runs nothing, and
// --track=auto says so once and runs the payload under procfs; with an
// unlimited RLIMIT_MEMLOCK (what the reason asks for) --track=bpf runs it
// under eBPF. At or above the floor both run it under eBPF, RLIMIT_MEMLOCK
// or not. make test-kernels runs it below the floor (its 5.10 leg).
package test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpu-hold/gpu-hold/internal/testenv"
	"github.com/gpu-hold/gpu-hold/tracker"
)

// floorReason is the part of tracker.CheckKernel's reason that names the floor.
const floorReason = "which the eBPF tracker needs"

// No subtests: kernel-suite's pattern (and its retry) names the routes'
// backend subtests, which a test without subtests runs whole.
func TestKernelFloor(t *testing.T) {
	testenv.NeedRoot(t, "loading the eBPF tracker")
	below := tracker.CheckKernel()
	if below == nil {
		testenv.NeedBPF(t, tracker.ProbeBPF())
	}
	t.Parallel()
	rel := tracker.KernelRelease()
	for _, c := range []struct {
		memlock, track string
		// Below the floor: the exit code, the payload's backend, and
		// how many lines give the floor as the reason. At or above it:
		// 0, bpf, none.
		code    int
		under   string
		reasons int
	}{
		// 64 KiB: the kernel's default before 5.16 (8 MiB since).
		{"64", "--track=bpf", 125, "", 1},
		{"64", "--track=auto", 0, "proc", 1},
		{"unlimited", "--track=bpf", 0, "bpf", 0},
	} {
		code, under, reasons := 0, "bpf", 0
		if below != nil {
			code, under, reasons = c.code, c.under, c.reasons
		} else if c.memlock == "unlimited" {
			continue // the case of the kernels below the floor only
		}
		what := "ulimit -l " + c.memlock + "; gpu-hold " + c.track + " on " + rel
		got, stderr, ran := floorHold(t, c.memlock, c.track, code != 0)
		if got != code {
			t.Errorf("%s exited %d, want %d\nstderr:\n%s", what, got, code, stderr)
		}
		if be := startedBackend(stderr); be != under {
			t.Errorf("%s started the payload under %q, want %q\nstderr:\n%s", what, be, under, stderr)
		}
		if ran != (code == 0) {
			t.Errorf("%s: payload ran = %v, want %v", what, ran, code == 0)
		}
		// Below the floor the floor is the reason, on one line.
		var said []string
		for _, l := range strings.Split(stderr, "\n") {
			if strings.Contains(l, floorReason) {
				said = append(said, l)
				t.Logf("%s: %s", what, l)
			}
		}
		if len(said) != reasons {
			t.Errorf("%s has %d lines that say %q, want %d (the kernel: %v)\nstderr:\n%s", what, len(said), floorReason, reasons, below, stderr)
		}
	}
}

// floorHold runs one hold of `touch` under track with RLIMIT_MEMLOCK set to
// memlock (KiB, or unlimited) and returns its exit code, its stderr (JSON
// logs) and whether the payload ran. A refused hold must leave its queue
// dir empty.
func floorHold(t *testing.T, memlock, track string, refused bool) (int, string, bool) {
	t.Helper()
	d, q := t.TempDir(), t.TempDir()
	// Raising it needs CAP_SYS_RESOURCE: bash's error says so when it fails.
	cmd := exec.Command("bash", "-c", `ulimit -l "$1" && shift && exec "$@"`, "-", memlock,
		bin, "--dir", q, "--log-format", "json", track, "--", "touch", filepath.Join(d, "ran"))
	var stderr strings.Builder
	cmd.Env = append(os.Environ(), markEnv+"="+newMark(t))
	cmd.Stderr = &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if refused {
		requireEmpty(t, q)
	}
	return code, stderr.String(), exists(filepath.Join(d, "ran"))
}
