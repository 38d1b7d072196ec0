// groups_pin.go owns the host's shared copy of the process-group iterators,
// pinned by the spare maker beside the device scan: it holds no state, so
// every hold on the host can run the one copy.
package bpf

import (
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"
)

// Pin names: the pass over every task, and the walk of one group.
const (
	groupsPinProg   = "prog"
	groupsPinProgOf = "prog_of"
)

func groupsPinDir() string { return filepath.Join(SpareRoot(), "groups_"+spareBuild()) }

// GroupsPinned reports whether the shared process-group iterators are
// there to open (pinned together: a reader never sees one alone).
func GroupsPinned() bool {
	_, err := os.Stat(filepath.Join(groupsPinDir(), groupsPinProg))
	return err == nil
}

// openPinnedGroups opens the shared process-group iterators.
func openPinnedGroups() (*groupsPrograms, error) {
	if _, err := spareNames(); err != nil {
		return nil, err // SpareRoot missing, or writable by others than root
	}
	all, err := ebpf.LoadPinnedProgram(filepath.Join(groupsPinDir(), groupsPinProg), nil)
	if err != nil {
		return nil, err
	}
	// The walk is pinned where the kernel loaded it.
	of, err := ebpf.LoadPinnedProgram(filepath.Join(groupsPinDir(), groupsPinProgOf), nil)
	if err != nil {
		of = nil
	}
	return &groupsPrograms{ListGroups: all, ListGroupOf: of}, nil
}

// pinGroups loads the process-group iterator and pins it for the host,
// unless it is pinned already. SpareRoot must exist (openSpareRoot).
func pinGroups() error {
	if GroupsPinned() {
		return nil
	}
	progs, err := loadGroupsPrograms()
	if err != nil {
		return err
	}
	defer progs.Close()
	pins := map[string]pinner{groupsPinProg: progs.ListGroups}
	if progs.ListGroupOf != nil {
		pins[groupsPinProgOf] = progs.ListGroupOf
	}
	return pinDir(groupsPinDir(), pins)
}
