// kernelbtf.go owns this process's one copy of the kernel's BTF: reading and
// indexing /sys/kernel/btf/vmlinux is the largest part of loading any of the
// programs, so the seal's kfunc check, the lineage and the device scan share
// one parse instead of making one each.
package bpf

import (
	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
)

var kernelBTF = btf.NewCache()

// loadOptions makes a load use the shared kernel BTF.
func loadOptions() *ebpf.CollectionOptions {
	return &ebpf.CollectionOptions{Cache: kernelBTF}
}
