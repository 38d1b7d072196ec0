// spare_root_test.go tests that this package's tests own their spare
// root: what they make is pinned in a root of this test process's own
// (internal/teststock.PrivateRoot), not in the host's, where real holds
// and other test processes take and make spares. The host's root is not
// compared before and after: real holds change it at any time, and a test
// that needs it still is a test that depends on the host.
package bpf

import (
	"strings"
	"testing"

	"github.com/gpu-hold/gpu-hold/internal/testenv"
)

func TestSparesInAPrivateRoot(t *testing.T) {
	testenv.NeedRoot(t, "a test of the eBPF spares")
	root := SpareRoot()
	if root == hostSpareRoot || !strings.HasPrefix(root, BPFFS+"/gpu-hold-test-") {
		t.Fatalf("this test process's spare root is %s: want one of its own, not the host's %s", root, hostSpareRoot)
	}
	before := SpareCount()
	_, err := MakeSpares(before + 1)
	testenv.NeedBPF(t, err)
	// MakeSpares makes spares until SpareRoot() has the count asked: had it
	// pinned them elsewhere (the host's root), this count would not grow.
	if SpareCount() <= before {
		t.Fatalf("MakeSpares(%d) left %d spares in the private root %s: they went elsewhere", before+1, SpareCount(), root)
	}
}

// Only a name under the BPF filesystem's gpu-hold-test- counts.
func TestSpareRootEnvChecked(t *testing.T) {
	for v, want := range map[string]string{
		BPFFS + "/gpu-hold-test-12-34":      BPFFS + "/gpu-hold-test-12-34",
		BPFFS + "/gpu-hold-test-":           hostSpareRoot,
		BPFFS + "/gpu-hold-test-a/../..":    hostSpareRoot,
		BPFFS + "/gpu-hold-test-a/b":        hostSpareRoot,
		"/tmp/gpu-hold-test-1":              hostSpareRoot,
		BPFFS + "/gpu-hold-spare-elsewhere": hostSpareRoot,
	} {
		t.Setenv(SpareRootEnv, v)
		if got := SpareRoot(); got != want {
			t.Errorf("%s=%s: spare root %s, want %s", SpareRootEnv, v, got, want)
		}
	}
}
