// link_test.go checks what links where: the etcd server, which the tests
// run, never links into gpu-hold-fleet (only the client does), and the
// client, with grpc under it, never into the plain gpu-hold that every
// hold runs (its package init would cost each one milliseconds).
package etcdq

import (
	"os/exec"
	"strings"
	"testing"
)

// deps lists the packages cmd/gpu-hold links with the given go flags.
func deps(t *testing.T, flags ...string) []string {
	t.Helper()
	args := append(append([]string{"list"}, flags...), "-deps", "github.com/gpu-hold/gpu-hold/cmd/gpu-hold")
	out, err := exec.Command("go", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("go %v: %v\n%s", args, err, out)
	}
	return strings.Split(string(out), "\n")
}

func hasPrefix(l string, prefixes ...string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(l, p) {
			return true
		}
	}
	return false
}

func TestServerNotLinked(t *testing.T) {
	fleet := deps(t, "-tags", "etcd")
	if !strings.Contains(strings.Join(fleet, "\n"), "\ngo.etcd.io/etcd/client/v3\n") {
		t.Fatalf("gpu-hold-fleet does not link the etcd client: the check below would prove nothing")
	}
	for _, l := range fleet {
		if hasPrefix(l, "go.etcd.io/etcd/server/", "go.etcd.io/raft/", "go.etcd.io/bbolt") {
			t.Errorf("gpu-hold-fleet links %s: the etcd server must stay in internal/etcdserver, run as a process of its own", l)
		}
	}
}

func TestClientNotInPlainBuild(t *testing.T) {
	for _, l := range deps(t) {
		if hasPrefix(l, "go.etcd.io/", "google.golang.org/grpc", "google.golang.org/genproto", "golang.org/x/net/trace", "go.uber.org/zap") {
			t.Errorf("gpu-hold (built without -tags etcd) links %s: only gpu-hold-fleet may (import queue/etcdq from cmd/gpu-hold/fleet_etcd.go only)", l)
		}
	}
}
