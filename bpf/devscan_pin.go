// devscan_pin.go owns the host's shared copy of the device-scan iterator:
// pinned once under SpareRoot by the spare maker, opened by any hold in a
// few system calls instead of a load that reads the kernel's BTF. Its
// targets map is the union of every device asked for (a host has few), so
// that two holds scanning at once never clear each other's targets; each
// keeps only the records of its own devices.
package bpf

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"
)

const (
	devscanPinProg    = "prog"
	devscanPinTargets = "targets"
)

// devscanPinDir is where this build's shared device scan is pinned.
func devscanPinDir() string { return filepath.Join(SpareRoot(), "devscan_"+spareBuild()) }

// DevscanPinned reports whether the shared device scan is there to open.
func DevscanPinned() bool {
	_, err := os.Stat(filepath.Join(devscanPinDir(), devscanPinProg))
	return err == nil
}

// openPinnedDevscan opens the shared device scan.
func openPinnedDevscan() (*devscanObjects, error) {
	if _, err := spareNames(); err != nil {
		return nil, err // SpareRoot missing, or writable by others than root
	}
	dir := devscanPinDir()
	prog, err := ebpf.LoadPinnedProgram(filepath.Join(dir, devscanPinProg), nil)
	if err != nil {
		return nil, err
	}
	m, err := ebpf.LoadPinnedMap(filepath.Join(dir, devscanPinTargets), nil)
	if err != nil {
		prog.Close()
		return nil, err
	}
	return &devscanObjects{devscanPrograms: devscanPrograms{FindDeviceFiles: prog}, devscanMaps: devscanMaps{Targets: m}}, nil
}

// pinDevscan loads the device scan and pins it for the host, unless it is
// pinned already. SpareRoot must exist (openSpareRoot).
func pinDevscan() error {
	if DevscanPinned() {
		return nil
	}
	spec, err := loadDevscan()
	if err != nil {
		return fmt.Errorf("reading the embedded device-scan BPF object: %w", err)
	}
	var objs devscanObjects
	if err := spec.LoadAndAssign(&objs, loadOptions()); err != nil {
		return fmt.Errorf("loading the device-scan BPF iterator: %w", loadError(err))
	}
	defer objs.Close() // the pins keep them
	return pinDir(devscanPinDir(), map[string]pinner{devscanPinProg: objs.FindDeviceFiles, devscanPinTargets: objs.Targets})
}

// addTargets adds devs to a shared targets map, removing none.
func addTargets(m *ebpf.Map, devs []Dev) error {
	for _, d := range devs {
		if err := m.Put(devKey(d), uint8(1)); err != nil {
			return fmt.Errorf("filling the shared device-scan targets map: %w", err)
		}
	}
	return nil
}

// onlyDevs keeps the files of devs.
func onlyDevs(files []DevFile, devs []Dev) []DevFile {
	want := make(map[Dev]bool, len(devs))
	for _, d := range devs {
		want[d] = true
	}
	out := files[:0]
	for _, f := range files {
		if want[f.Dev] {
			out = append(out, f)
		}
	}
	return out
}
