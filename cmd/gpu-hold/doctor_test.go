// doctor_test.go owns the tests of gpu-hold doctor's report of the queue
// directory: one line per problem, each with its fix.
package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/gpu-hold/gpu-hold/internal/fleetenv"
	"github.com/gpu-hold/gpu-hold/tracker"
)

func TestDoctorQueueDirLines(t *testing.T) {
	rep := doctorReport{QueueDir: fleetenv.DirReport{Path: "/q", Fleet: true, Group: "gpu-hold", Problems: []fleetenv.DirProblem{
		{Path: "/q", Problem: "mode 0755, want 3775", Fix: "chmod 3775 /q"},
		{Path: "/q/gpu", Problem: "owned by uid 1000", Fix: "chown root /q/gpu"},
	}}}
	var out bytes.Buffer
	if err := doctorRun(&doctorOptions{Out: &out, Checks: func() doctorReport { return rep }}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"queue dir /q (shared through group gpu-hold): 2 problem(s)\n",
		"  /q: mode 0755, want 3775; fix: chmod 3775 /q\n",
		"  /q/gpu: owned by uid 1000; fix: chown root /q/gpu\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out.String())
		}
	}
	rep.QueueDir = fleetenv.DirReport{Path: "/home/u/.local/state/gpu-hold", Problems: []fleetenv.DirProblem{}}
	out.Reset()
	doctorRun(&doctorOptions{Out: &out, Checks: func() doctorReport { return rep }})
	if !strings.Contains(out.String(), "private (only its owner may write it): nothing to set up") {
		t.Errorf("private dir: %s", out.String())
	}
}

// TestDoctorKernelSeal: the kernel row names the seal and never fails for
// lack of the kfunc; GPU_HOLD_BPF_SEAL=fork shows as the reason.
func TestDoctorKernelSeal(t *testing.T) {
	t.Setenv("GPU_HOLD_BPF_SEAL", "fork")
	c, seal := kernelCheck()
	if want := "; seal: kill at fork, children by the KILL pass (GPU_HOLD_BPF_SEAL=fork)"; seal != "fork" || !strings.HasSuffix(c.Detail, want) {
		t.Errorf("kernel row %+v, seal %q: want seal fork and a detail ending %q", c, seal, want)
	}
	t.Setenv("GPU_HOLD_BPF_SEAL", "never")
	if c, seal := kernelCheck(); seal != "" || !strings.Contains(c.Detail, "GPU_HOLD_BPF_SEAL=\"never\"") {
		t.Errorf("kernel row %+v, seal %q for a bad GPU_HOLD_BPF_SEAL", c, seal)
	}
}

// TestDoctorIteratorsRow: doctor says whether the host's iterators are
// pinned, and what an eBPF teardown does without the group list.
func TestDoctorIteratorsRow(t *testing.T) {
	for _, c := range runDoctorChecks().Checks {
		if c.Name == "bpf iterators" {
			if !strings.Contains(c.Detail, "process groups") || !strings.Contains(c.Detail, "device scan") {
				t.Errorf("bpf iterators row %+v names neither iterator", c)
			}
			return
		}
	}
	t.Error("doctor has no bpf iterators row")
}

// TestDoctorWatchRow: doctor says whether the host's device watch is
// attached, and with it what the watch holds.
func TestDoctorWatchRow(t *testing.T) {
	st, err := tracker.DeviceWatchStatus()
	if err != nil {
		t.Fatal(err)
	}
	want := "not attached yet"
	if st.Pinned {
		want = fmt.Sprintf("%d opener(s)", st.Openers)
	}
	for _, c := range runDoctorChecks().Checks {
		if c.Name == "device watch" {
			if !c.OK || !strings.Contains(c.Detail, want) || !strings.Contains(c.Detail, st.Dir) {
				t.Errorf("device watch row %+v: want it OK, naming %s and saying %q", c, st.Dir, want)
			}
			return
		}
	}
	t.Error("doctor has no device watch row")
}
