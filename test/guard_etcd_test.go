// guard_etcd_test.go owns the guard on the etcd fleet queue: the holder is
// read from etcd (and counts only when it is this host's), so a hold's
// payload on the device is spared and an intruder is not.
package test

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/etcdtest"
	"github.com/gpu-hold/gpu-hold/internal/proc"
)

// Catches: a guard that reads the holder from the queue directory only,
// where an etcd hold has none (every fleet job's payload ended).
func TestGuardEtcdHolder(t *testing.T) {
	e := newGuardEnv(t)
	url := etcdtest.Start(t).URL("/gpu-hold-guard-test") + "?ttl=5"
	out := filepath.Join(e.scratch, "payload")
	h := rig{}.start(t, e.qdir, newMark(t), e.scratch, "--queue", url, "-r", "fake", "--cgroup=off", "-l", "fleetjob", "-g", "1s", "--",
		e.opener, "path", e.node, out, "ignore")
	payload := openerIdent(t, out)
	intruder := e.holdOpen(t, e.opener, "intruder", "ignore")
	g := e.startGuard(t, "--queue", url, "--enforce", "-g", "1s")
	deadline := time.Now().Add(slowed(20 * time.Second))
	for proc.Alive(intruder) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if proc.Alive(intruder) {
		t.Fatalf("test shape: the intruder was not ended\n%s", g.Stderr())
	}
	e.waitScans(t, e.scans(t)+2)
	requireVictimAlive(t, payload, "the fleet job's payload")
	if a := e.audited(t, payload); len(a) != 0 {
		t.Errorf("the guard audited the fleet job's payload: %v", a)
	}
	h.Signal(syscall.SIGTERM)
	h.Wait(20 * time.Second)
}
