// devfind_test.go checks, as root, that the device-holder check's kernel
// path finds a holder of a fake device node (an unused device number, held
// with O_PATH) and agrees with the walk of /proc it replaces.
package hold

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/gpu-hold/gpu-hold/internal/device"
	marks "github.com/gpu-hold/gpu-hold/internal/mark"
	"github.com/gpu-hold/gpu-hold/internal/plant"
	"github.com/gpu-hold/gpu-hold/internal/testenv"
	"github.com/gpu-hold/gpu-hold/tracker"
)

func TestDeviceCheckKernelPathFindsHolder(t *testing.T) {
	node := filepath.Join(t.TempDir(), "fakegpu0")
	f, _ := plant.FakeDevice(t, node, 3)
	mark := marks.New()
	cmd := exec.Command("sleep", "600")
	cmd.Env = append(os.Environ(), marks.Env+"="+mark)
	cmd.ExtraFiles = []*os.File{f, f} // fds 3 and 4
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	t.Cleanup(func() { marks.Kill(mark); cmd.Wait() })

	kernel := func(devs []device.DevNum, paths []string) ([]int, error) { // whatever the host's size
		td := make([]tracker.Dev, len(devs))
		for i, d := range devs {
			td[i] = tracker.Dev(d)
		}
		return tracker.KernelDevicePIDs(td, paths, cgroupMount())
	}
	kern, how, why, err := device.ScanHoldersWith([]string{node}, kernel)
	if err != nil {
		t.Fatal(err)
	}
	if how != device.MethodKernel {
		testenv.NeedBPF(t, &kernelPathError{why})
	}
	walk, how, _, err := device.ScanHoldersWith([]string{node}, nil)
	if err != nil || how != device.MethodProc {
		t.Fatalf("the walk of /proc: %v, %s", err, how)
	}
	if len(kern) != 1 || kern[0].PID != cmd.Process.Pid || !reflect.DeepEqual(kern[0].FDs, []int{3, 4}) {
		t.Fatalf("kernel path found %+v; want pid %d holding %s as fds 3 and 4", kern, cmd.Process.Pid, node)
	}
	if !reflect.DeepEqual(kern, walk) {
		t.Fatalf("kernel path found %+v, the walk of /proc %+v", kern, walk)
	}
}

type kernelPathError struct{ why string }

func (e *kernelPathError) Error() string { return "the kernel path did not answer: " + e.why }
