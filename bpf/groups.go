// groups.go owns the kernel's list of process groups: groups.bpf.c, two
// iter/task programs, and GroupMembers, which runs them (the host's pinned
// copy when the spare maker made one, else one loaded per process) and
// keeps the members of one group.
package bpf

//go:generate go tool bpf2go -tags linux -target bpfel -cflags "-O2 -g -Wall -Werror -mcpu=v3" -type task_group groups groups.bpf.c -- -I/usr/include/x86_64-linux-gnu -I/usr/include/aarch64-linux-gnu

import (
	"encoding/binary"
	"fmt"
	"sync"
	"unsafe"

	"github.com/cilium/ebpf"
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

// OpenGroups opens the host's pinned copy of the programs, or loads them,
// ahead of a GroupMembers that will need them.
func OpenGroups() error {
	groupsObjs.mu.Lock()
	defer groupsObjs.mu.Unlock()
	_, err := groupsProgram()
	return err
}

// GroupMembers returns the tgid of every process whose process group is
// pgid, read from the kernel. While a task has pgid's number (a payload's
// leader, alive or a zombie not yet reaped), the kernel's own list of that
// number's group is walked from it: the cost of the group. Else every
// task of the host is read in one pass. An error means the kernel could
// not answer: walk /proc instead.
func GroupMembers(pgid int) ([]int, error) {
	groupsObjs.mu.Lock()
	prog, err := groupsProgram()
	groupsObjs.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if members, ok := walkGroup(prog.ListGroupOf, pgid); ok {
		return members, nil
	}
	raw, err := runIter(prog.ListGroups, "process-group")
	if err != nil {
		return nil, err
	}
	records, err := groupRecords(raw)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, r := range records {
		if int(r.Pgid) == pgid {
			out = append(out, int(r.Tgid))
		}
	}
	return out, nil
}

// walkGroup lists pgid's group by list_group_of, run on the task whose pid
// is pgid. ok is false when it could not answer: no such task, a walk cut
// short, or a kernel without the iterator's task filter.
func walkGroup(prog *ebpf.Program, pgid int) (members []int, ok bool) {
	if prog == nil || pgid <= 0 || !taskFilterHonoured(prog) {
		return nil, false
	}
	raw, err := runTaskIter(prog, pgid, "process-group walk")
	if err != nil {
		return nil, false
	}
	records, err := groupRecords(raw)
	if err != nil {
		return nil, false
	}
	return walked(records, pgid)
}

// walked reads a walk's records: pgid's members, then one record (pgid, 0)
// for the list's end. Anything else is no answer.
func walked(records []groupsTaskGroup, pgid int) (members []int, ok bool) {
	if len(records) == 0 {
		return nil, false
	}
	last := records[len(records)-1]
	if int(last.Tgid) != pgid || last.Pgid != 0 {
		return nil, false // cut short: no record of the list's end
	}
	for _, r := range records[:len(records)-1] {
		if int(r.Pgid) != pgid {
			return nil, false // the walk of another task: the filter was not applied
		}
		members = append(members, int(r.Tgid))
	}
	return members, true
}

// groupRecords decodes what a process-group iterator wrote.
func groupRecords(raw []byte) ([]groupsTaskGroup, error) {
	size := int(unsafe.Sizeof(groupsTaskGroup{}))
	if len(raw)%size != 0 {
		return nil, fmt.Errorf("the process-group BPF iterator wrote %d bytes, not a whole number of %d-byte records", len(raw), size)
	}
	out := make([]groupsTaskGroup, 0, len(raw)/size)
	for off := 0; off < len(raw); off += size {
		out = append(out, groupsTaskGroup{Tgid: binary.NativeEndian.Uint32(raw[off:]), Pgid: binary.NativeEndian.Uint32(raw[off+4:])})
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
		o.prog, o.shared = p, true
		return o.prog, nil
	}
	o.prog, o.err = loadGroupsPrograms()
	return o.prog, o.err
}

// loadGroupsPrograms loads the pass over every task, which a kernel with
// task iterators runs (5.8), and then the walk, which needs bpf_loop (5.17)
// and the link's task filter (6.1): one at a time, so that a kernel that
// refuses the walk still lists groups (ListGroupOf is then nil).
func loadGroupsPrograms() (*groupsPrograms, error) {
	spec, err := loadGroups()
	if err != nil {
		return nil, fmt.Errorf("reading the embedded process-group BPF object: %w", err)
	}
	var all struct {
		Prog *ebpf.Program `ebpf:"list_groups"`
	}
	if err := spec.LoadAndAssign(&all, loadOptions()); err != nil {
		return nil, fmt.Errorf("loading the process-group BPF iterator: %w", loadError(err))
	}
	var of struct {
		Prog *ebpf.Program `ebpf:"list_group_of"`
	}
	if spec.LoadAndAssign(&of, loadOptions()) != nil {
		of.Prog = nil
	}
	return &groupsPrograms{ListGroups: all.Prog, ListGroupOf: of.Prog}, nil
}
