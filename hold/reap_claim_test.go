// reap_claim_test.go tests what a reap takes for evidence that a process
// it may not signal is the dead holder's lineage.
package hold

import (
	"os"
	"testing"

	"github.com/gpu-hold/gpu-hold/internal/proc"
)

// A claim whose cgroup is gone (the reap removed it once empty) is no
// evidence for anyone, and asking must not fail.
func TestEvidenceWithoutCgroup(t *testing.T) {
	self, err := proc.ReadStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for _, cg := range []string{"", t.TempDir() + "/gone"} {
		c := claim{cgroup: cg}
		c.HoldID = "no-such-hold"
		if c.evidence(self) {
			t.Errorf("cgroup %q: the test process was taken for the dead holder's lineage", cg)
		}
	}
}
