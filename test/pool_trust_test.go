// pool_trust_test.go: another user of a shared queue dir writes tickets
// that claim pool devices: a granted ticket of its own on a device's queue,
// kept locked, and a pool ticket that says it runs on that device. Neither
// gives it the device or keeps anyone from it, and the device a real holder
// of another user has stays that holder's. And a pool payload that rewrites
// its own tickets to outlive its gpu-hold is still reaped.
package test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/proc"
)

// fleetPool gives the fleet's gpu a pool of n plain files, in a
// resources.json root owns, and has root make its queue dirs (as an admin
// would) with one hold of all of them.
func fleetPool(t *testing.T, f *fleet, n int) {
	t.Helper()
	devdir := openDir(t)
	var devs []string
	for i := range n {
		p := filepath.Join(devdir, fmt.Sprintf("dev%d", i))
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		devs = append(devs, fmt.Sprintf(`{"nodes": [%q]}`, p))
	}
	cfg := fmt.Sprintf(`{"gpu": {"devices": [], "pool": {"devices": [%s]}}}`, strings.Join(devs, ", "))
	if err := os.WriteFile(filepath.Join(f.Dir, "resources.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := f.Root.start(t, f.Dir, newMark(t), "", "-n", fmt.Sprint(n), "--", "true").Wait(30 * time.Second); r.Code != 0 {
		t.Fatalf("preparing the pool's dirs: exit %d\n%s", r.Code, r.Stderr)
	}
}

// lockedAs keeps path flocked by a marked process of cred until the test ends.
func lockedAs(t *testing.T, cred *syscall.Credential, path string) {
	t.Helper()
	c := exec.Command("flock", "-x", path, "sleep", "120")
	c.Env = append(os.Environ(), markEnv+"="+newMark(t))
	c.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	for range 500 {
		if exec.Command("flock", "-n", "-s", path, "true").Run() != nil {
			return // locked by the forger
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s never got locked", path)
}

func TestFleetPoolForgedClaims(t *testing.T) {
	f := newFleet(t, "proc")
	fleetPool(t, f, 2)
	scratch := openDir(t)
	log := filepath.Join(scratch, "inside.log")
	os.WriteFile(log, nil, 0o666)
	os.Chmod(log, 0o666)
	gofile := filepath.Join(scratch, "go")
	// uidA holds device 0.
	a := f.A.start(t, f.Dir, newMark(t), "", append([]string{"-l", "a", "-n", "1", "--"}, qPayload(log, "a", gofile)...)...)
	for i := 0; len(qEntered(log)) == 0; i++ {
		if i > 3000 {
			t.Fatalf("uidA's payload never entered:\n%s", a.Stderr())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// uidB claims device 1 with a granted ticket of its own, locked, and
	// a pool ticket that says it runs there.
	self, _ := proc.Self()
	now := time.Now()
	for _, forged := range []struct {
		res string
		tk  map[string]any
	}{
		{"gpu.d1", map[string]any{"seq": forgedSeq, "resource": "gpu.d1", "holder": self, "uid": uidB, "created": now, "granted": now, "pool_seq": 7, "bound_ns": 1}},
		{"gpu", map[string]any{"seq": forgedSeq, "resource": "gpu", "holder": self, "uid": uidB, "created": now, "devices": []int{1}, "count": 1}},
	} {
		path := filepath.Join(f.Dir, forged.res, fmt.Sprintf("t.%020d", forgedSeq))
		b, _ := json.Marshal(forged.tk)
		writeAs(t, userCred(uidB), path, append(b, '\n'))
		lockedAs(t, userCred(uidB), path)
	}
	// Root asks for one device: it gets device 1 at once, not device 0.
	r := f.Root.start(t, f.Dir, newMark(t), "", "-n", "1", "-w", "20s", "--", "sh", "-c", "echo got $GPU_HOLD_DEVICES").Wait(30 * time.Second)
	if r.Code != 0 || !strings.Contains(r.Stdout, "got 1") {
		t.Fatalf("root's hold: exit %d, stdout %q: the forged claims on device 1 must not count\n%s", r.Code, r.Stdout, r.Stderr)
	}
	t.Logf("root's hold printed %q", r.Stdout)
	st := poolStatus(t, f.Dir)
	if h := st.Devices[0].Holder; h == nil || h.Label != "a" {
		t.Fatalf("device 0 is no longer uidA's: %+v", st.Devices[0])
	}
	if h := st.Devices[1].Holder; h != nil {
		t.Fatalf("device 1 shows a holder after root released it: %+v (the forged ticket counted)", h)
	}
	os.WriteFile(gofile, nil, 0o644)
	if r := a.Wait(30 * time.Second); r.Code != 0 {
		t.Fatalf("uidA's hold exited %d\n%s", r.Code, r.Stderr)
	}
}

// A root pool hold's payload rewrites its pool and device tickets to name,
// as their holder, a TERM-ignoring process of its own that keeps them
// locked once its gpu-hold is SIGKILLed. Catches: a device ticket that is
// live and names a live process, yet holds no lock of its device's queue,
// left alone as "not dead", so that the successor given that device runs
// beside the lineage (queue's unit test covers one device queue; this is
// the pool's grant end to end).
func TestFleetPoolPayloadRewritesItsTickets(t *testing.T) {
	f := newFleet(t, "proc")
	fleetPool(t, f, 2)
	body := fmt.Sprintf(`ts=$(grep -l "$GPU_HOLD_ID" %[1]q/gpu/t.* %[1]q/gpu.d*/t.*)
(trap "" TERM; for t in $ts; do exec {fd}<"$t"; flock -x $fd; done; : > "$GH_T/locked"; exec sleep 300) &
l=$!
put c $l
s=$(cut -d' ' -f22 /proc/$l/stat)
for t in $ts; do
	new=$(sed "s/\"holder\":{[^}]*}/\"holder\":{\"pid\":$l,\"start\":$s}/" "$t")
	echo "$new" > "$t"
done
put ready 1
wait
`, f.Dir)
	a := sigkilledHolder(t, f.Root, f, "gpu", body, func(_, scratch string) func() {
		return func() { waitFile(t, filepath.Join(scratch, "locked"), 10*time.Second) }
	})
	if dev := poolStatus(t, f.Dir).Devices[0]; len(dev.Dead) != 1 || dev.Dead[0].PoolSeq != a.seq {
		t.Errorf("gpu-hold queue --json shows device 0 as %+v; want the device ticket of pool ticket %d, rewritten and locked by the payload's own process, among its dead", dev, a.seq)
	}
	rootSuccessorFindsNone(t, f, "gpu", "r", a.mark, "-n", "2") // both devices: the rewritten one among them
	requireNoneLeft(t, a.mark)
}
