// probe_quick.go owns the cheap half of the eBPF backend's probe: what a
// hold checks before it queues (privileges, kernel BTF, the kernel's floor,
// the host's pid namespace, a seal the environment asks for), so that a
// host that cannot track says so at once, while the programs themselves
// are loaded only once the ticket reaches the head of the queue.
package tracker

import (
	"os"

	"github.com/gpu-hold/gpu-hold/bpf"
)

// ProbeBPFQuick says why the eBPF backend cannot be used here, as far as
// can be told without loading anything (nil: it should load; only the
// kernel's verifier can still refuse). ProbeBPF is the full probe.
func ProbeBPFQuick() error { return probeCheap(os.Getenv(bpf.SealEnv) != "") }

// probeCheap is the checks that load nothing: capabilities, kernel BTF,
// the kernel's floor (with RLIMIT_MEMLOCK), the seal (when seal: it reads
// the kernel's BTF), the host's pid namespace.
func probeCheap(seal bool) error {
	fail := func(reason string) error { return &ProbeError{Backend: BackendBPF, Reason: reason} }
	caps, err := EffectiveCaps()
	if err != nil {
		return fail(err.Error())
	}
	if !caps.CanTrace() {
		return fail(notPermitted + "; this process has " + caps.String())
	}
	if err := CheckBTF(); err != nil {
		return fail(err.Error())
	}
	if err := CheckFloor(); err != nil {
		return fail(err.Error())
	}
	if seal {
		if _, err := Seal(); err != nil {
			return fail(err.Error())
		}
	}
	if err := CheckHostPidNS(); err != nil {
		return fail(err.Error())
	}
	return nil
}
