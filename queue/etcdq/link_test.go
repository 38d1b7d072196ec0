// link_test.go checks that the etcd server, which the tests run, never
// links into gpu-hold: only the client does.
package etcdq

import (
	"os/exec"
	"strings"
	"testing"
)

func TestServerNotLinked(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/gpu-hold/gpu-hold/cmd/gpu-hold").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := string(out)
	if !strings.Contains(deps, "go.etcd.io/etcd/client/v3\n") {
		t.Fatalf("gpu-hold does not link the etcd client: the check below would prove nothing")
	}
	for _, l := range strings.Split(deps, "\n") {
		if strings.HasPrefix(l, "go.etcd.io/etcd/server/") || strings.HasPrefix(l, "go.etcd.io/raft/") || strings.HasPrefix(l, "go.etcd.io/bbolt") {
			t.Errorf("gpu-hold links %s: the etcd server must stay in internal/etcdserver, run as a process of its own", l)
		}
	}
}
