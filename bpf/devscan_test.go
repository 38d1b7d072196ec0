// devscan_test.go tests the device-scan iterator as root: it reports a
// process outside this one that holds a fake device node (an unused device
// number, opened with O_PATH as nothing can open it otherwise), by the fd it
// holds it as, and nothing for a device number no one holds.
package bpf

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	marks "github.com/gpu-hold/gpu-hold/internal/mark"
	"github.com/gpu-hold/gpu-hold/internal/plant"
	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/testenv"
)

// TestFindDeviceFilesFindsFakeNodeHolder runs once with this process's own
// copy of the iterator and once with the host's shared, pinned one, whose
// targets map keeps every device asked for before.
func TestFindDeviceFilesFindsFakeNodeHolder(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run(copyName(shared), func(t *testing.T) {
			if shared {
				pinForTest(t, pinDevscan)
			}
			devscanLoaded.mu.Lock()
			if devscanLoaded.objs != nil {
				devscanLoaded.objs.Close()
			}
			devscanLoaded.objs, devscanLoaded.err = nil, nil
			devscanLoaded.shared, devscanLoaded.noPinned = false, !shared
			devscanLoaded.mu.Unlock()
			findFakeNodeHolder(t)
			if devscanLoaded.shared != shared {
				t.Fatalf("the scan used the shared copy: %v, want %v", devscanLoaded.shared, shared)
			}
		})
	}
}

func findFakeNodeHolder(t *testing.T) {
	node := filepath.Join(t.TempDir(), "fakegpu0")
	f, major := plant.FakeDevice(t, node, 7)
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
