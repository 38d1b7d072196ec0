// groups.go owns the kernel's list of process groups: groups.bpf.c, an
// iter/task program, and GroupMembers, which runs it (the host's pinned
// copy when the spare maker made one, else one loaded per process) and
// keeps the members of one group.
package bpf

//go:generate go tool bpf2go -tags linux -target bpfel -cflags "-O2 -g -Wall -Werror -mcpu=v3" -type task_group groups groups.bpf.c -- -I/usr/include/x86_64-linux-gnu -I/usr/include/aarch64-linux-gnu

import (
	"encoding/binary"
	"fmt"
	"sync"
	"unsafe"
)

// groupsObjs is the loaded program, kept for the life of the process: a
// teardown lists the group at each pass.
var groupsObjs struct {
	mu     sync.Mutex
	prog   *groupsPrograms
	shared bool
	err    error
}

// GroupsReady reports whether listing groups costs no load of the kernel's
// BTF: this process has the program, or the host has it pinned.
func GroupsReady() bool {
	groupsObjs.mu.Lock()
	defer groupsObjs.mu.Unlock()
	return groupsObjs.prog != nil || KernelBTFRead() || GroupsPinned()
}

// GroupMembers returns the tgid of every process whose process group is
// pgid, read from the kernel's task list in one pass. An error means the
// kernel could not answer: walk /proc instead.
func GroupMembers(pgid int) ([]int, error) {
	groupsObjs.mu.Lock()
	prog, err := groupsProgram()
	groupsObjs.mu.Unlock()
	if err != nil {
		return nil, err
	}
	raw, err := runIter(prog.ListGroups, "process-group")
	if err != nil {
		return nil, err
	}
	size := int(unsafe.Sizeof(groupsTaskGroup{}))
	if len(raw)%size != 0 {
		return nil, fmt.Errorf("the process-group BPF iterator wrote %d bytes, not a whole number of %d-byte records", len(raw), size)
	}
	var out []int
	for off := 0; off < len(raw); off += size {
		tgid := binary.NativeEndian.Uint32(raw[off:])
		if int(binary.NativeEndian.Uint32(raw[off+4:])) == pgid {
			out = append(out, int(tgid))
		}
	}
	return out, nil
}

// groupsProgram opens the host's pinned copy, else loads one, once per
// process; a failure is remembered. Called under groupsObjs.mu.
func groupsProgram() (*groupsPrograms, error) {
	o := &groupsObjs
	if o.prog != nil || o.err != nil {
		return o.prog, o.err
	}
	if p, err := openPinnedGroups(); err == nil {
		o.prog, o.shared = &groupsPrograms{ListGroups: p}, true
		return o.prog, nil
	}
	spec, err := loadGroups()
	if err != nil {
		o.err = fmt.Errorf("reading the embedded process-group BPF object: %w", err)
		return nil, o.err
	}
	var objs groupsObjects
	if err := spec.LoadAndAssign(&objs, loadOptions()); err != nil {
		o.err = fmt.Errorf("loading the process-group BPF iterator: %w", loadError(err))
		return nil, o.err
	}
	o.prog = &objs.groupsPrograms
	return o.prog, nil
}
