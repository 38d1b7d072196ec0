// pool_reap_test.go: a pool hold SIGKILLed while its payload runs on two
// devices: `gpu-hold reap -r gpu` ends the payload (its dead holder is on
// the devices' queues, not the pool's), and the devices are free after.
package test

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func TestPoolReapAfterKill(t *testing.T) {
	dir := poolQueueDir(t, 3)
	scratch := t.TempDir()
	log := filepath.Join(scratch, "inside.log")
	mark := newMark(t)
	h := newHold(t, dir, mark, append([]string{"-l", "victim", "-n", "2", "--track", "proc", "--"}, pcPayload(log, "victim", filepath.Join(scratch, "never"))...)...).Start()
	waitFile(t, log, 30*time.Second)
	h.Signal(syscall.SIGKILL)
	h.Wait(10 * time.Second)
	if len(marked(mark)) == 0 {
		t.Fatal("the payload died with its hold: nothing to reap")
	}
	r := qCmd(t, dir, "reap", "-r", "gpu")
	if r.Code != 0 {
		t.Fatalf("reap exited %d:\n%s", r.Code, r.Stderr)
	}
	if pids := waitUnmarked(mark, 10*time.Second); len(pids) != 0 {
		t.Fatalf("reap -r gpu left the dead pool holder's payload running: %v\n%s", pids, r.Stderr)
	}
	st := poolStatus(t, dir)
	for _, d := range st.Devices {
		if d.Holder != nil || len(d.Dead) > 0 {
			t.Errorf("device %d after the reap: %+v", d.Index, d)
		}
	}
}
