// iter_task.go owns running an iter/task program on one task only: the
// link's task filter (union bpf_iter_link_info's task, Linux 6.1 and
// later), which cilium/ebpf's AttachIter does not offer.
package bpf

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// iterTaskInfo is union bpf_iter_link_info as its task member fills it,
// padded to the union's size.
type iterTaskInfo struct {
	tid, pid, pidFD uint32
	_               uint32
}

// linkCreateIterAttr is union bpf_attr as BPF_LINK_CREATE reads it for an
// iterator.
type linkCreateIterAttr struct {
	progFD, targetFD, attachType, flags uint32
	iterInfo                            uint64
	iterInfoLen                         uint32
	_                                   uint32
}

// runTaskIter runs prog, an iter/task program, on the task tid alone and
// returns what it wrote. A kernel without the task filter refuses the link.
func runTaskIter(prog *ebpf.Program, tid int, what string) ([]byte, error) {
	it, err := attachTaskIter(prog, tid)
	if err != nil {
		return nil, fmt.Errorf("attaching the %s BPF iterator to task %d: %w", what, tid, err)
	}
	return readLink(it, what)
}

// taskFilterHonoured reports whether this kernel applies an iterator link's
// task filter (6.1 and later): one that does refuses a filter naming both
// a thread and a process (EINVAL); one from before reads the same bytes
// as a map's and refuses them for their length (E2BIG), or, where it
// ignores them, would run the program on every task. Asked once.
var taskFilterHonoured = func() func(*ebpf.Program) bool {
	var once sync.Once
	var honoured bool
	return func(prog *ebpf.Program) bool {
		once.Do(func() {
			it, err := attachTaskIterInfo(prog, &iterTaskInfo{tid: 1, pid: 1})
			if err == nil {
				it.Close()
			}
			honoured = errors.Is(err, unix.EINVAL)
		})
		return honoured
	}
}()

func attachTaskIter(prog *ebpf.Program, tid int) (*link.Iter, error) {
	return attachTaskIterInfo(prog, &iterTaskInfo{tid: uint32(tid)})
}

func attachTaskIterInfo(prog *ebpf.Program, info *iterTaskInfo) (*link.Iter, error) {
	var pin runtime.Pinner // the kernel reads info through a plain address
	pin.Pin(info)
	defer pin.Unpin()
	attr := linkCreateIterAttr{
		progFD:      uint32(prog.FD()),
		attachType:  unix.BPF_TRACE_ITER,
		iterInfo:    uint64(uintptr(unsafe.Pointer(info))),
		iterInfoLen: uint32(unsafe.Sizeof(*info)),
	}
	fd, _, errno := unix.Syscall(unix.SYS_BPF, unix.BPF_LINK_CREATE, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	if errno != 0 {
		return nil, errno
	}
	lk, err := link.NewFromFD(int(fd))
	if err != nil {
		unix.Close(int(fd))
		return nil, err
	}
	it, ok := lk.(*link.Iter)
	if !ok {
		lk.Close()
		return nil, fmt.Errorf("the kernel made a %T, not an iterator link", lk)
	}
	return it, nil
}
