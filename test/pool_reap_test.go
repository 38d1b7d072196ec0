// pool_reap_test.go: a pool hold SIGKILLed while its payload runs on two
// devices: `gpu-hold reap -r gpu` ends the payload (its dead holder is on
// the devices' queues, not the pool's), and the devices are free after;
// a pool's metrics, per pool and per device; a --count the pool cannot
// give; and a pool ticket's -w and cancel.
package test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestPoolReapAfterKill(t *testing.T) {
	for _, be := range backends(t) {
		t.Run(be, func(t *testing.T) { poolReapAfterKill(t, rigFor(be).Track) })
	}
}

func poolReapAfterKill(t *testing.T, track []string) {
	dir := poolQueueDir(t, 3)
	scratch := t.TempDir()
	log := filepath.Join(scratch, "inside.log")
	mark := newMark(t)
	args := append(append([]string{"-l", "victim", "-n", "2"}, track...), "--")
	h := newHold(t, dir, mark, append(args, pcPayload(log, "victim", filepath.Join(scratch, "never"))...)...).Start()
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

func TestPoolCountBeyondPool(t *testing.T) {
	mark := newMark(t)
	for _, c := range []struct {
		dir, n, want string
	}{
		{poolQueueDir(t, 3), "4", "more than the 3 device(s)"},
		{t.TempDir(), "2", "more than the 1 device(s)"},
		{poolQueueDir(t, 3), "0", "at least 1"},
	} {
		r := newHold(t, c.dir, mark, "-n", c.n, "--", "true").Run(30 * time.Second)
		if r.Code != 125 || !strings.Contains(r.Stderr, c.want) {
			t.Errorf("-n %s: exit %d, want 125 saying %q:\n%s", c.n, r.Code, c.want, r.Stderr)
		}
	}
}

func TestPoolWaitAllowanceAndCancel(t *testing.T) {
	dir := poolQueueDir(t, 2)
	scratch := t.TempDir()
	log := filepath.Join(scratch, "inside.log")
	gofile := filepath.Join(scratch, "go")
	mark := newMark(t)
	a := newHold(t, dir, mark, append([]string{"-l", "a", "-n", "2", "--track", "proc", "--"}, pcPayload(log, "a", gofile)...)...).Start()
	waitFile(t, log, 30*time.Second)
	// -w runs out: exit 75, ticket gone.
	if r := newHold(t, dir, mark, "-l", "b", "-n", "1", "-w", "1s", "--", "true").Run(30 * time.Second); r.Code != 75 || !strings.Contains(r.Stderr, "wait allowance") {
		t.Errorf("a pool hold whose -w ran out: exit %d, want 75\n%s", r.Code, r.Stderr)
	}
	// Cancelled while waiting: exit 75; a running pool ticket cannot be cancelled.
	c := newHold(t, dir, mark, "-l", "c", "-n", "1", "--", "true").Start()
	st := poolStatus(t, dir)
	for i := 0; len(st.Waiters) == 0; i++ {
		if i > 1000 {
			t.Fatalf("c never queued: %+v", st)
		}
		time.Sleep(10 * time.Millisecond)
		st = poolStatus(t, dir)
	}
	if r := qCmd(t, dir, "cancel", "-r", "gpu", fmt.Sprint(st.Running[0].Seq)); r.Code == 0 {
		t.Errorf("cancel of the running pool ticket succeeded:\n%s", r.Stderr)
	}
	if r := qCmd(t, dir, "cancel", "-r", "gpu", fmt.Sprint(st.Waiters[0].Seq)); r.Code != 0 {
		t.Fatalf("cancel of the waiting pool ticket: exit %d\n%s", r.Code, r.Stderr)
	}
	if r := c.Wait(30 * time.Second); r.Code != 75 {
		t.Errorf("a cancelled pool hold exited %d, want 75\n%s", r.Code, r.Stderr)
	}
	os.WriteFile(gofile, nil, 0o644)
	if r := a.Wait(30 * time.Second); r.Code != 0 {
		t.Fatalf("a exited %d\n%s", r.Code, r.Stderr)
	}
	if st := poolStatus(t, dir); len(st.Waiters)+len(st.Running) != 0 {
		t.Errorf("tickets left: %+v", st)
	}
}
