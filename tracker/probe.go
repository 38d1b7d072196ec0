// probe.go owns the backend probes that --track=auto uses to choose, and
// that say exactly why a backend cannot be used on this host.
package tracker

import (
	"errors"
	"os"
	"sync"

	"github.com/gpu-hold/gpu-hold/bpf"
	"github.com/gpu-hold/gpu-hold/internal/proc"
)

var probeBPF = sync.OnceValue(probeBPFOnce)

// notPermitted is ProbeBPF's reason when capabilities are missing.
const notPermitted = "not permitted: loading tracing programs needs root, or CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN)"

// ProbeBPF says why the eBPF backend cannot be used here, or nil: not
// permitted (capabilities), no kernel BTF, a kernel below the floor
// (CheckFloor), a seal GPU_HOLD_BPF_SEAL asks for that the kernel lacks, a
// pid namespace other than the host's, or the kernel refusing to load or
// attach the programs (with the verifier's reason). A kernel without bpf_send_signal_task is no reason: it gets the
// seal that needs no kfunc (Seal). It loads and attaches a throwaway copy
// of the programs once per process, and remembers the answer.
func ProbeBPF() error { return probeBPF() }

func probeBPFOnce() error {
	fail := func(reason string) error { return &ProbeError{Backend: BackendBPF, Reason: reason} }
	if err := probeCheap(true); err != nil {
		return err
	}
	// The real test: load and attach, with the smallest maps.
	l, err := bpf.Load(bpf.Options{EventBytes: uint32(os.Getpagesize()), Capacity: 1})
	if err != nil {
		var le *bpf.LoadError
		if errors.As(err, &le) {
			return fail("the kernel refused the programs: " + le.Line)
		}
		return fail(err.Error())
	}
	if err := l.Close(); err != nil {
		return fail("closing the probe programs: " + err.Error())
	}
	return nil
}

// ProbeProc says why the procfs backend cannot be used here, or nil: /proc
// not readable, no pidfds, no child subreaper.
func ProbeProc() error {
	fail := func(reason string) error { return &ProbeError{Backend: BackendProc, Reason: reason} }
	if _, err := proc.Self(); err != nil {
		return fail("cannot read /proc/self/stat: " + err.Error() + " (is /proc mounted?)")
	}
	if err := CheckPidfd(); err != nil {
		return fail(err.Error())
	}
	if err := CheckSubreaper(); err != nil {
		return fail(err.Error())
	}
	return nil
}
