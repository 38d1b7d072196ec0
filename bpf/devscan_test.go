// devscan_test.go tests the device-scan iterator as root: it reports a
// process outside this one that holds a fake device node (an unused device
// number, opened with O_PATH as nothing can open it otherwise), by the fd it
// holds it as, and nothing for a device number no one holds.
package bpf

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	marks "github.com/gpu-hold/gpu-hold/internal/mark"
	"github.com/gpu-hold/gpu-hold/internal/testenv"
	"github.com/gpu-hold/gpu-hold/proc"
)

// fakeMajor is a character device major reserved for local use (Linux's
// devices.txt: 234-254 are dynamically assigned, 240-254 for local and
// experimental use): one that /proc/devices does not list.
func fakeMajor(t *testing.T) uint32 {
	data, err := os.ReadFile("/proc/devices")
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, f := range strings.Fields(string(data)) {
		used[f] = true
	}
	for m := 254; m >= 240; m-- {
		if !used[strconv.Itoa(m)] {
			return uint32(m)
		}
	}
	t.Skip("no unused character device major in 240-254")
	return 0
}

func TestFindDeviceFilesFindsFakeNodeHolder(t *testing.T) {
	testenv.NeedRoot(t, "loading a BPF iterator")
	major := fakeMajor(t)
	node := filepath.Join(t.TempDir(), "fakegpu0")
	if err := unix.Mknod(node, unix.S_IFCHR|0o600, int(unix.Mkdev(major, 7))); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(node, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), node)
	defer f.Close()

	mark := marks.New()
	cmd := exec.Command("sleep", "600")
	cmd.Env = append(os.Environ(), marks.Env+"="+mark)
	cmd.ExtraFiles = []*os.File{f} // fd 3 in the holder
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { marks.Kill(mark); cmd.Wait() })
	st, err := proc.ReadStat(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}

	files, err := FindDeviceFiles([]Dev{{Major: major, Minor: 7}})
	testenv.NeedBPF(t, err)
	var found bool
	for _, df := range files {
		if df.Dev != (Dev{Major: major, Minor: 7}) {
			t.Errorf("reported %+v, a device not asked for", df)
		}
		if df.PID == cmd.Process.Pid {
			found = true
			if df.FD != 3 || NsToTicks(df.StartNs) != st.Start {
				t.Errorf("holder reported as %+v; want fd 3, start tick %d", df, st.Start)
			}
		}
	}
	if !found {
		t.Fatalf("the holder (pid %d, fd 3) of %s (%d:7) is not among %+v", cmd.Process.Pid, node, major, files)
	}

	// A device number no one holds: nothing. The same loaded program
	// answers a second call with other targets.
	files, err = FindDeviceFiles([]Dev{{Major: major, Minor: 8}, {Block: true, Major: major, Minor: 7}})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 0 {
		t.Fatalf("reported %+v for device numbers no one holds", files)
	}
}
