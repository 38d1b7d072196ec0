// seal.go owns the choice of seal: which of the two compiled copies of
// lineage.bpf.c a hold loads, by whether the kernel's BTF has the kfunc
// bpf_send_signal_task (Linux 6.13+), or as GPU_HOLD_BPF_SEAL forces.
package bpf

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
)

// SealMode is how a sealed lineage stops growing.
type SealMode string

const (
	// SealBirth: a member that forks is killed at the fork, and its child
	// at birth, before its first instruction (bpf_send_signal_task).
	SealBirth SealMode = "birth"
	// SealFork: a member that forks is killed at the fork; its child, a
	// member, lives until the KILL pass ends it through its pidfd. No
	// kfunc: any kernel that loads the programs.
	SealFork SealMode = "fork"
)

// String is the seal as `gpu-hold doctor` and the log say it.
func (m SealMode) String() string {
	switch m {
	case SealBirth:
		return "kill at birth (bpf_send_signal_task)"
	case SealFork:
		return "kill at fork, children by the KILL pass"
	}
	return "unknown"
}

// SealEnv names the environment variable that forces a seal, a test and
// diagnostic knob: "fork" loads the copy without the kfunc on any kernel,
// "birth" insists on the kfunc, "" or "auto" lets the kernel decide.
const SealEnv = "GPU_HOLD_BPF_SEAL"

// SendSignalTask is the kfunc the birth seal calls.
const SendSignalTask = "bpf_send_signal_task"

// HasSendSignalTask reports whether the kernel's BTF has the kfunc, read
// once per process.
var HasSendSignalTask = sync.OnceValues(func() (bool, error) {
	btfUsed.Store(true)
	spec, err := kernelBTF.Kernel()
	if err != nil {
		return false, fmt.Errorf("reading the kernel's BTF: %w", err)
	}
	var fn *btf.Func
	if err := spec.TypeByName(SendSignalTask, &fn); err != nil {
		if errors.Is(err, btf.ErrNotFound) {
			return false, nil
		}
		return false, fmt.Errorf("looking up %s in the kernel's BTF: %w", SendSignalTask, err)
	}
	return true, nil
})

// SealChoice is the seal Load chooses on this host, and why.
type SealChoice struct {
	Mode SealMode
	// Why is empty when the kernel has the kfunc and nothing forced the
	// choice; else e.g. "no bpf_send_signal_task: Linux < 6.13".
	Why string
}

// String is the choice as `gpu-hold doctor` and the log say it.
func (c SealChoice) String() string {
	if c.Why == "" {
		return c.Mode.String()
	}
	return c.Mode.String() + " (" + c.Why + ")"
}

// HostSeal says which seal Load chooses on this host: the environment's
// choice (SealEnv), else the kernel's.
func HostSeal() (SealChoice, error) {
	has, err := HasSendSignalTask()
	switch env := os.Getenv(SealEnv); env {
	case "fork":
		return SealChoice{SealFork, SealEnv + "=fork"}, nil
	case "birth":
		if err != nil || !has {
			return SealChoice{}, fmt.Errorf("%s=birth, but %s: unset it to use the seal this kernel has", SealEnv, noKfunc(err))
		}
		return SealChoice{SealBirth, SealEnv + "=birth"}, nil
	case "", "auto":
	default:
		return SealChoice{}, fmt.Errorf("%s=%q: use fork, birth or auto, or unset it", SealEnv, env)
	}
	if err != nil {
		return SealChoice{}, err
	}
	if !has {
		return SealChoice{SealFork, noKfunc(nil)}, nil
	}
	return SealChoice{Mode: SealBirth}, nil
}

// noKfunc says why the kfunc cannot be used.
func noKfunc(err error) string {
	if err != nil {
		return err.Error()
	}
	return "no " + SendSignalTask + ": Linux < 6.13"
}

// specFor is the compiled copy of the programs for a seal.
func specFor(m SealMode) (*ebpf.CollectionSpec, error) {
	switch m {
	case SealBirth:
		return loadLineage()
	case SealFork:
		return loadLineageNokfunc()
	}
	return nil, fmt.Errorf("no BPF programs for seal %q", m)
}

// SealsHere lists the seals this kernel can load: SealFork always,
// SealBirth where the kernel has the kfunc (the tests run each).
func SealsHere() []SealMode {
	if has, _ := HasSendSignalTask(); has {
		return []SealMode{SealBirth, SealFork}
	}
	return []SealMode{SealFork}
}
