// groups_pin.go owns the host's shared copy of the process-group iterator,
// pinned by the spare maker beside the device scan: it holds no state, so
// every hold on the host can run the one copy.
package bpf

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"
)

const groupsPinProg = "prog"

func groupsPinDir() string { return filepath.Join(SpareRoot, "groups_"+spareBuild()) }

// GroupsPinned reports whether the shared process-group iterator is
// there to open.
func GroupsPinned() bool {
	_, err := os.Stat(filepath.Join(groupsPinDir(), groupsPinProg))
	return err == nil
}

// openPinnedGroups opens the shared process-group iterator.
func openPinnedGroups() (*ebpf.Program, error) {
	if _, err := spareNames(); err != nil {
		return nil, err // SpareRoot missing, or writable by others than root
	}
	return ebpf.LoadPinnedProgram(filepath.Join(groupsPinDir(), groupsPinProg), nil)
}

// pinGroups loads the process-group iterator and pins it for the host,
// unless it is pinned already. SpareRoot must exist (openSpareRoot).
func pinGroups() error {
	if GroupsPinned() {
		return nil
	}
	spec, err := loadGroups()
	if err != nil {
		return fmt.Errorf("reading the embedded process-group BPF object: %w", err)
	}
	var objs groupsObjects
	if err := spec.LoadAndAssign(&objs, loadOptions()); err != nil {
		return fmt.Errorf("loading the process-group BPF iterator: %w", loadError(err))
	}
	defer objs.Close()
	return pinDir(groupsPinDir(), map[string]pinner{groupsPinProg: objs.ListGroups})
}
