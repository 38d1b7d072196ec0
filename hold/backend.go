// backend.go owns the choice of tracker backend: --track=bpf is eBPF or a
// clear error; auto is eBPF when it can load, else procfs with a one-line
// notice that says why; proc is procfs.
package hold

import (
	"fmt"

	"github.com/rs/zerolog"

	"github.com/gpu-hold/gpu-hold/tracker"
)

// chooseBackend returns the backend and, for a fallback, the notice.
func chooseBackend(track string, log zerolog.Logger) (backend, note string, err error) {
	switch track {
	case "proc":
		return tracker.BackendProc, "", nil
	case "bpf":
		if err := tracker.ProbeBPF(); err != nil {
			return "", "", fmt.Errorf("--track=bpf: %v; run as root on a kernel with BTF, or use --track=proc", err)
		}
		return tracker.BackendBPF, "", nil
	}
	if err := tracker.ProbeBPF(); err != nil {
		note = "eBPF tracker unavailable, using procfs: " + err.Error()
		log.Warn().Str("reason", err.Error()).Msg(note)
		return tracker.BackendProc, note, nil
	}
	return tracker.BackendBPF, "", nil
}
