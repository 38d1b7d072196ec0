// Package testenv holds the one rule every test follows when this host
// lacks something it needs: on a developer's machine the test is skipped
// and says why; in CI, where .ci/run sets GPU_HOLD_REQUIRE_BPF=1 and
// GPU_HOLD_REQUIRE_HOST=1 on a root host that has everything, the same
// lack is a failure, so nothing is ever skipped there in silence.
package testenv

import (
	"fmt"
	"os"
	"testing"
)

// Variables .ci/run sets.
const (
	RequireBPF  = "GPU_HOLD_REQUIRE_BPF"  // the eBPF tracker must load
	RequireHost = "GPU_HOLD_REQUIRE_HOST" // root, cgroups, freezer, PSI, ns_last_pid... must be there
)

// NeedBPF fails (CI) or skips (elsewhere) when err says BPF cannot load.
func NeedBPF(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		lack(t, RequireBPF, fmt.Sprintf("the eBPF tracker cannot load here: %v", err))
	}
}

// Need fails (CI) or skips (elsewhere) with the reason: something this
// host lacks.
func Need(t testing.TB, format string, args ...any) {
	t.Helper()
	lack(t, RequireHost, fmt.Sprintf(format, args...))
}

// NeedRoot is Need for a test that must run as root.
func NeedRoot(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		Need(t, "%s needs root", why)
	}
}

func lack(t testing.TB, env, reason string) {
	t.Helper()
	if os.Getenv(env) == "1" {
		t.Fatalf("%s=1, but %s", env, reason)
	}
	t.Skip(reason)
}
