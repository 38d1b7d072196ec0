// pool_reap_test.go: a pool hold SIGKILLed while its payload runs on two
// devices: `gpu-hold reap -r gpu` ends the payload (its dead holder is on
// the devices' queues, not the pool's), and the devices are free after;
// and a pool's metrics, per pool and per device.
package test

import (
	"os"
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

func TestPoolMetricsPerDevice(t *testing.T) {
	dir := poolQueueDir(t, 3)
	mdir := t.TempDir()
	mark := newMark(t)
	for _, n := range []string{"2", "1"} {
		if r := newHold(t, dir, mark, "-n", n, "--track", "proc", "--metrics-dir", mdir, "--", "true").Run(30 * time.Second); r.Code != 0 {
			t.Fatalf("hold -n %s exited %d:\n%s", n, r.Code, r.Stderr)
		}
	}
	if v := sample(t, readMetrics(t, mdir, "gpu"), "gpu_hold_holds_granted_total", ""); v != 2 {
		t.Errorf("the pool's holds_granted_total = %v, want 2", v)
	}
	// Both holds took the lowest free devices: device 0 twice, device 1
	// once (the files are named after the device queues, gpu.d0 as gpu_d0).
	for dev, want := range map[string]float64{"gpu_d0": 2, "gpu_d1": 1} {
		if v := sample(t, readMetrics(t, mdir, dev), "gpu_hold_holds_granted_total", ""); v != want {
			t.Errorf("%s holds_granted_total = %v, want %v", dev, v, want)
		}
	}
	if _, err := os.Stat(filepath.Join(mdir, "gpu_hold_gpu_d2.prom")); err == nil {
		t.Error("device 2, which no hold had, has metrics")
	}
}
