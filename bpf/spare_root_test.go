// spare_root_test.go tests that this package's tests own their spare
// root: what they make is pinned in a root of this test process's own
// (internal/teststock.PrivateRoot), and the host's root, where real holds
// and other test processes take and make spares, is left as it was.
package bpf

import (
	"os"
	"slices"
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
	hostBefore := hostNames()
	_, err := MakeSpares(SpareCount() + 1)
	testenv.NeedBPF(t, err)
	if SpareCount() == 0 {
		t.Fatal("MakeSpares made no spare in the private root")
	}
	if after := hostNames(); !slices.Equal(after, hostBefore) {
		t.Errorf("the host's spare root changed under a test: %v, then %v", hostBefore, after)
	}
}

// hostNames lists the host's spare root, sorted (nil when there is none).
func hostNames() []string {
	ents, _ := os.ReadDir(hostSpareRoot)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	return names
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
