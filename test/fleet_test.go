// fleet_test.go owns the tests of the fleet queue on etcd against the
// real binary and a real etcd (internal/etcdserver, a process of its own):
// the table that runs the queue tests on both backends, holds from three
// simulated hosts, and the faults: etcd stopped mid-hold, stopped and
// restarted while a ticket waits, a holder frozen past its lease's TTL,
// and etcd unreachable at start.
package test

import (
	"strconv"
	"sync"
	"testing"

	"github.com/gpu-hold/gpu-hold/internal/etcdtest"
)

// fleetTTL is the lease TTL of the tests' fleet queues, in seconds.
const fleetTTL = 2

var queueEnvs sync.Map // queue dir -> the environment that selects its etcd queue

// queueEnv is the environment a hold or subcommand in dir runs with: the
// etcd queue the test set for dir, if any.
func queueEnv(dir string) []string {
	if v, ok := queueEnvs.Load(dir); ok {
		return v.([]string)
	}
	return nil
}

// useEtcd makes every hold and subcommand in dir queue in s.
func useEtcd(t *testing.T, dir string, s *etcdtest.Server) {
	queueEnvs.Store(dir, []string{"GPU_HOLD_QUEUE=" + s.URL("/gpu-hold-test") + "?ttl=" + strconv.Itoa(fleetTTL)})
	t.Cleanup(func() { queueEnvs.Delete(dir) })
}

// forQueues runs f on the directory backend and on etcd, each in a
// private queue dir (with etcd, records are still written there).
func forQueues(t *testing.T, f func(t *testing.T, dir string)) {
	t.Run("dir", func(t *testing.T) { f(t, t.TempDir()) })
	t.Run("etcd", func(t *testing.T) {
		dir := t.TempDir()
		useEtcd(t, dir, etcdtest.Start(t))
		f(t, dir)
	})
}
