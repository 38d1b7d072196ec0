// kernelbtf.go owns this process's one copy of the kernel's BTF: reading and
// indexing /sys/kernel/btf/vmlinux is the largest part of loading any of the
// programs, so the seal's kfunc check, the lineage and the device scan share
// one parse instead of making one each.
package bpf

import (
	"sync/atomic"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
)

var (
	kernelBTF = btf.NewCache()
	btfUsed   atomic.Bool // something has asked kernelBTF for the kernel's types
)

// loadOptions makes a load use the shared kernel BTF.
func loadOptions() *ebpf.CollectionOptions {
	btfUsed.Store(true)
	return &ebpf.CollectionOptions{Cache: kernelBTF}
}

// KernelBTFRead reports whether this process has read the kernel's BTF
// already (or is reading it), so that another load costs little more.
func KernelBTFRead() bool { return btfUsed.Load() }
