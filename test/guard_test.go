// guard_test.go owns the tests of `gpu-hold guard` against the real binary,
// with a fake device: a character node with a major no driver has (mknod
// in a private directory, named by a resources.json of a private queue
// dir), held through O_PATH (the only open such a node allows; the scan
// sees the fd all the same). An intruder is named within the scan period;
// with --enforce it is ended, TERM first, KILL after the grace, while the
// token holder's lineage and the allow-listed processes are left alone;
// the audit log and the metrics name it.
package test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/cprog"
	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/testenv"
)

// guardPeriod is the scan period of the guards under test.
const guardPeriod = 200 * time.Millisecond

// guardEnv is one guard's world: a queue dir whose resource "fake" is one
// fake node, and the two builds of the device opener (one allow-listed).
type guardEnv struct {
	qdir, scratch, node   string
	audit, mdir, allow    string
	opener, allowedOpener string
}

func newGuardEnv(t *testing.T) *guardEnv {
	t.Helper()
	testenv.NeedRoot(t, "mknod of a fake device node, and a guard that sees every process")
	e := &guardEnv{qdir: t.TempDir(), scratch: openDir(t), mdir: t.TempDir()}
	e.node = fakeNode(t, t.TempDir())
	e.audit = filepath.Join(t.TempDir(), "audit.jsonl")
	cfg := fmt.Sprintf(`{"fake": {"devices": [%q]}}`, e.node)
	if err := os.WriteFile(filepath.Join(e.qdir, "resources.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	e.opener = cprog.DevOpen(t, t.TempDir())
	e.allowedOpener = cprog.DevOpen(t, t.TempDir())
	e.allow = filepath.Join(t.TempDir(), "allow.json")
	if err := os.WriteFile(e.allow, []byte(fmt.Sprintf(`{"allow": [{"exe": %q}]}`, e.allowedOpener)), 0o644); err != nil {
		t.Fatal(err)
	}
	return e
}

// fakeNode makes a character device node with a major no driver has.
func fakeNode(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/devices")
	if err != nil {
		t.Fatal(err)
	}
	used := map[uint32]bool{}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				used[uint32(n)] = true
			}
		}
	}
	// 234-254: the dynamic and experimental range; the first one free.
	for major := uint32(234); major <= 254; major++ {
		if used[major] {
			continue
		}
		// A random minor: other tests may fake a node of this major now.
		p := filepath.Join(dir, "fakegpu0")
		if err := unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(major, uint32(rand.IntN(1<<20))))); err != nil {
			testenv.Need(t, "mknod of a fake device node failed: %v", err)
		}
		return p
	}
	testenv.Need(t, "no free character major in 234-254 for a fake device")
	return ""
}

// startGuard starts `gpu-hold guard -r fake` with the env's audit, metrics
// and allow-list, and args.
func (e *guardEnv) startGuard(t *testing.T, args ...string) *started {
	t.Helper()
	base := []string{"guard", "-r", "fake", "--period", guardPeriod.String(), "--audit", e.audit, "--metrics-dir", e.mdir, "--allow", e.allow}
	return rig{}.start(t, e.qdir, newMark(t), "", append(base, args...)...)
}

// holdOpen starts an opener outside any hold (exe: which build) and
// returns its identity once it holds the node.
func (e *guardEnv) holdOpen(t *testing.T, exe, name, term string) proc.Ident {
	t.Helper()
	out := filepath.Join(e.scratch, name)
	c := exec.Command(exe, "path", e.node, out, term)
	c.Env = append(os.Environ(), markEnv+"="+newMark(t))
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	go c.Wait()
	return openerIdent(t, out)
}

// openerIdent reads an opener's "ok PID" and returns its identity.
func openerIdent(t *testing.T, out string) proc.Ident {
	t.Helper()
	waitFile(t, out, 10*time.Second)
	b, _ := os.ReadFile(out)
	f := strings.Fields(string(b))
	if len(f) != 2 || f[0] != "ok" {
		t.Fatalf("the device opener could not open the node: %q", b)
	}
	pid, _ := strconv.Atoi(f[1])
	return stat(t, pid).Ident
}

// holdOnFake starts a hold on "fake" whose payload holds the node and
// ignores TERM; it returns the hold and the payload's identity.
func (e *guardEnv) holdOnFake(t *testing.T) (*started, proc.Ident) {
	t.Helper()
	out := filepath.Join(e.scratch, "payload")
	h := rig{}.start(t, e.qdir, newMark(t), e.scratch, "-r", "fake", "-l", "holder", "-g", "1s", "--device-holders", "warn", "--", e.opener, "path", e.node, out, "ignore")
	return h, openerIdent(t, out)
}

// guardLine is one log line of the guard.
type guardLine struct {
	Message string    `json:"message"`
	PID     int       `json:"pid"`
	Start   uint64    `json:"start"`
	Node    string    `json:"node"`
	Time    time.Time `json:"time"`
}

// guardLogs decodes the guard's log lines with message msg.
func guardLogs(s *started, msg string) []guardLine {
	var out []guardLine
	for _, l := range strings.Split(s.Stderr(), "\n") {
		var g guardLine
		if json.Unmarshal([]byte(l), &g) == nil && strings.HasPrefix(g.Message, msg) {
			out = append(out, g)
		}
	}
	return out
}

const intruderMsg = "intruder:"

// waitNamed waits until the guard named id, and returns the line.
func waitNamed(t *testing.T, s *started, id proc.Ident, limit time.Duration) guardLine {
	t.Helper()
	deadline := time.Now().Add(slowed(limit))
	for {
		for _, l := range guardLogs(s, intruderMsg) {
			if l.PID == id.PID && l.Start == id.Start {
				return l
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the guard did not name %v within %v\nstderr:\n%s", id, limit, s.Stderr())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitScans waits until the guard's metrics count n scans.
func (e *guardEnv) waitScans(t *testing.T, n float64) {
	t.Helper()
	deadline := time.Now().Add(slowed(20 * time.Second))
	for {
		if _, err := os.Stat(filepath.Join(e.mdir, "gpu_hold_guard.prom")); err == nil {
			if f := readMetrics(t, e.mdir, "guard")["gpu_hold_guard_scans_total"]; f != nil && f.Metric[0].GetCounter().GetValue() >= n {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the guard never counted %v scans", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// scans is the guard's scan count in its metrics now (0: none yet).
func (e *guardEnv) scans(t *testing.T) float64 {
	t.Helper()
	if _, err := os.Stat(filepath.Join(e.mdir, "gpu_hold_guard.prom")); err != nil {
		return 0
	}
	if f := readMetrics(t, e.mdir, "guard")["gpu_hold_guard_scans_total"]; f != nil {
		return f.Metric[0].GetCounter().GetValue()
	}
	return 0
}

// lastScan is how long the guard's last scan took, from its metrics.
func (e *guardEnv) lastScan(t *testing.T) time.Duration {
	t.Helper()
	e.waitScans(t, 1)
	f := readMetrics(t, e.mdir, "guard")["gpu_hold_guard_scan_seconds"]
	if f == nil {
		t.Fatal("no gpu_hold_guard_scan_seconds in the guard's metrics")
	}
	return time.Duration(f.Metric[0].GetGauge().GetValue() * float64(time.Second))
}

// auditLine is one line of the audit log.
type auditLine struct {
	Action string `json:"action"`
	PID    int    `json:"pid"`
	Start  uint64 `json:"start"`
	Node   string `json:"node"`
	Reason string `json:"reason"`
}

// audited returns the actions the audit log records for id, in order.
func (e *guardEnv) audited(t *testing.T, id proc.Ident) []string {
	t.Helper()
	b, _ := os.ReadFile(e.audit)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		var a auditLine
		if json.Unmarshal([]byte(l), &a) == nil && a.PID == id.PID && a.Start == id.Start {
			out = append(out, a.Action)
		}
	}
	return out
}

// waitAudited waits (a bound for "did not hang") until the audit of id
// reads want, and returns what it reads.
func (e *guardEnv) waitAudited(t *testing.T, id proc.Ident, want string) string {
	t.Helper()
	deadline := time.Now().Add(slowed(5 * time.Second))
	for {
		got := strings.Join(e.audited(t, id), ",")
		if got == want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestGuardNamesIntruder: a guard (without --enforce) names an intruder
// that held the node before it started and one that opens it after,
// within its period, in its log, its audit log and its metrics; it names
// neither the token holder's payload nor an allow-listed process, and
// signals nobody.
//
// Catches: a guard that counts every holder (the payload and the
// allow-listed one are named), one that misses fds opened before it
// started, and one whose metrics do not name the intruder.
func TestGuardNamesIntruder(t *testing.T) {
	e := newGuardEnv(t)
	h, payload := e.holdOnFake(t)
	before := e.holdOpen(t, e.opener, "before", "default")
	allowed := e.holdOpen(t, e.allowedOpener, "allowed", "ignore")
	g := e.startGuard(t)
	waitNamed(t, g, before, 5*time.Second)
	opened := time.Now()
	after := e.holdOpen(t, e.opener, "after", "default")
	// The stated bound: one period plus one scan (a scan reads every
	// process's fds: its time is the host's, read from the guard's metrics).
	l := waitNamed(t, g, after, 30*time.Second)
	took, scan := l.Time.Sub(opened), e.lastScan(t)
	bound := guardPeriod + 2*scan + time.Second
	t.Logf("opened to named: %v (period %v, last scan %v)", took.Round(time.Millisecond), guardPeriod, scan.Round(time.Millisecond))
	if took > bound {
		t.Errorf("named %v after the open, more than a period and a scan (%v)", took, bound)
	}
	e.waitScans(t, 4)
	for _, l := range guardLogs(g, intruderMsg) {
		if l.PID == payload.PID || l.PID == allowed.PID {
			t.Errorf("the guard named pid %d (the holder's payload is %d, the allow-listed process %d)", l.PID, payload.PID, allowed.PID)
		}
	}
	fams := readMetrics(t, e.mdir, "guard")
	if v := fams["gpu_hold_guard_intruders"].Metric[0].GetGauge().GetValue(); v != 2 {
		t.Errorf("gpu_hold_guard_intruders = %v, want 2", v)
	}
	if v := fams["gpu_hold_guard_allowed_holders"].Metric[0].GetGauge().GetValue(); v != 1 {
		t.Errorf("gpu_hold_guard_allowed_holders = %v, want 1", v)
	}
	pids := map[string]bool{}
	for _, m := range fams["gpu_hold_guard_intruder_seconds"].GetMetric() {
		for _, lp := range m.Label {
			if lp.GetName() == "pid" {
				pids[lp.GetValue()] = true
			}
		}
	}
	if !pids[strconv.Itoa(before.PID)] || !pids[strconv.Itoa(after.PID)] || len(pids) != 2 {
		t.Errorf("gpu_hold_guard_intruder_seconds names pids %v, want %d and %d", pids, before.PID, after.PID)
	}
	if f := fams["gpu_hold_guard_untokened_device_seconds_total"]; f == nil || f.Metric[0].GetCounter().GetValue() <= 0 {
		t.Errorf("no device-seconds without a token counted: %v", f)
	}
	if a := e.audited(t, before); len(a) != 1 || a[0] != "seen" {
		t.Errorf("audit of the intruder: %v, want [seen]", a)
	}
	if a := e.audited(t, payload); len(a) != 0 {
		t.Errorf("audit names the holder's payload: %v", a)
	}
	for _, id := range []proc.Ident{before, after, allowed, payload} {
		requireVictimAlive(t, id, "a device holder under a guard without --enforce")
	}
	h.Signal(syscall.SIGTERM)
	h.Wait(20 * time.Second)
}

// TestGuardEnforce: with --enforce, an intruder dies at TERM, a
// TERM-ignoring one at KILL after the grace, each step in the audit log;
// the token holder's payload (TERM-ignoring) and an allow-listed process
// (TERM-ignoring) are not signalled.
//
// Catches: a guard that ends the holder's lineage or the allow-listed, one
// that KILLs at once (no TERM in the audit), one that never KILLs.
func TestGuardEnforce(t *testing.T) {
	e := newGuardEnv(t)
	h, payload := e.holdOnFake(t)
	allowed := e.holdOpen(t, e.allowedOpener, "allowed", "ignore")
	polite := e.holdOpen(t, e.opener, "polite", "default")
	stubborn := e.holdOpen(t, e.opener, "stubborn", "ignore")
	g := e.startGuard(t, "--enforce", "-g", "1s")
	for _, id := range []proc.Ident{polite, stubborn} {
		deadline := time.Now().Add(slowed(guardPeriod + time.Second + 5*time.Second))
		for proc.Alive(id) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if proc.Alive(id) {
			t.Fatalf("intruder %v still alive under --enforce\nstderr:\n%s", id, g.Stderr())
		}
	}
	if a := e.waitAudited(t, polite, "seen,term,exited"); a != "seen,term,exited" {
		t.Errorf("audit of the intruder that obeys TERM: %s, want seen,term,exited", a)
	}
	if a := e.waitAudited(t, stubborn, "seen,term,kill,exited"); a != "seen,term,kill,exited" {
		t.Errorf("audit of the TERM-ignoring intruder: %s, want seen,term,kill,exited", a)
	}
	e.waitScans(t, e.scans(t)+2) // metrics written after the last signal
	requireVictimAlive(t, payload, "the token holder's payload")
	requireVictimAlive(t, allowed, "the allow-listed process")
	if a := e.audited(t, payload); len(a) != 0 {
		t.Errorf("audit names the holder's payload: %v", a)
	}
	fams := readMetrics(t, e.mdir, "guard")
	sig := map[string]float64{}
	for _, m := range fams["gpu_hold_guard_signals_total"].GetMetric() {
		for _, lp := range m.Label {
			if lp.GetName() == "signal" {
				sig[lp.GetValue()] = m.GetCounter().GetValue()
			}
		}
	}
	if sig["term"] != 2 || sig["kill"] != 1 {
		t.Errorf("gpu_hold_guard_signals_total: %v, want term 2, kill 1", sig)
	}
	h.Signal(syscall.SIGTERM)
	if r := h.Wait(20 * time.Second); r.Code != 143 {
		t.Errorf("the hold exited %d after TERM, want 143", r.Code)
	}
}

// TestGuardSparesEscapedMember: under the eBPF tracker without a cgroup,
// the holder's payload double-forks a daemon that holds the node: it is
// no longer below the holder (reparented away) and in no hold cgroup, but
// it is in the hold's pinned lineage, and --enforce must leave it alone.
//
// Catches: a guard that knows the lineage only by the process tree.
func TestGuardSparesEscapedMember(t *testing.T) {
	if err := bpfUsable(); err != nil {
		testenv.NeedBPF(t, err)
	}
	e := newGuardEnv(t)
	out := filepath.Join(e.scratch, "daemon")
	h := rig{}.start(t, e.qdir, newMark(t), e.scratch, "-r", "fake", "-l", "holder", "--track=bpf", "--cgroup=off", "-g", "1s", "--",
		"bash", "-c", fmt.Sprintf(`setsid bash -c '%q path %q %q ignore &' ; sleep 300`, e.opener, e.node, out))
	daemon := openerIdent(t, out)
	if st := stat(t, daemon.PID); st.PPID == h.Cmd.Process.Pid {
		t.Fatalf("test shape: the daemon %v is still the holder's child", daemon)
	}
	g := e.startGuard(t, "--enforce", "-g", "1s")
	e.waitScans(t, 4)
	requireVictimAlive(t, daemon, "the holder's double-forked daemon (in its pinned lineage)")
	if a := e.audited(t, daemon); len(a) != 0 {
		t.Errorf("the guard audited the holder's daemon: %v\n%s", a, g.Stderr())
	}
	h.Signal(syscall.SIGTERM)
	h.Wait(20 * time.Second)
}

// TestGuardPoolHolder: on a pool of two fake devices, a hold of one of
// them (its token is its device's queue, not the pool's) holds a node;
// the guard, with --enforce, must count it as a holder's lineage.
//
// Catches: a guard that reads only the pool resource's own token, which
// a pool hold never keeps (every pool job's payload named and ended).
func TestGuardPoolHolder(t *testing.T) {
	e, n0, _ := newPoolGuardEnv(t)
	out := filepath.Join(e.scratch, "payload")
	h := e.poolJob(t, fmt.Sprintf(`exec %q path %q %q ignore`, e.opener, n0, out))
	payload := openerIdent(t, out)
	intruder := e.holdOpen(t, e.opener, "intruder", "ignore")
	g := e.startGuard(t, "--enforce", "-g", "1s")
	deadline := time.Now().Add(slowed(20 * time.Second))
	for proc.Alive(intruder) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if proc.Alive(intruder) {
		t.Fatalf("test shape: the intruder was not ended\n%s", g.Stderr())
	}
	e.waitScans(t, e.scans(t)+2)
	requireVictimAlive(t, payload, "the pool job's payload")
	if a := e.audited(t, payload); len(a) != 0 {
		t.Errorf("the guard audited the pool job's payload: %v", a)
	}
	h.Signal(syscall.SIGTERM)
	h.Wait(20 * time.Second)
}

// TestGuardPoolHolderOnlyItsDevice: a pool job given one of two fake
// devices holds the node of the other, which nobody was given: the guard,
// with --enforce, must end it (no cgroup device filter here, as for every
// non-root hold: the guard is what keeps a job to its devices).
//
// Catches: a guard that spares, on every node of a pool, the lineage of
// any device's holder.
func TestGuardPoolHolderOnlyItsDevice(t *testing.T) {
	e, n0, n1 := newPoolGuardEnv(t)
	out := filepath.Join(e.scratch, "payload")
	h := e.poolJob(t, fmt.Sprintf(`n=%q; [ "$GPU_HOLD_DEVICES" = 0 ] || n=%q; exec %q path "$n" %q ignore`, n1, n0, e.opener, out))
	payload := openerIdent(t, out)
	g := e.startGuard(t, "--enforce", "-g", "1s")
	deadline := time.Now().Add(slowed(20 * time.Second))
	for proc.Alive(payload) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if proc.Alive(payload) {
		t.Errorf("the guard spared a pool job's payload on the node of a device it was not given\n%s", g.Stderr())
	}
	if a := e.audited(t, payload); len(a) == 0 {
		t.Errorf("the guard did not audit the pool job's payload on another device's node\n%s", g.Stderr())
	}
	h.Signal(syscall.SIGTERM)
	h.Wait(20 * time.Second)
}

// newPoolGuardEnv is a guard env whose resource "fake" is a pool of two
// fake devices, with their nodes.
func newPoolGuardEnv(t *testing.T) (e *guardEnv, n0, n1 string) {
	t.Helper()
	e = newGuardEnv(t)
	n0, n1 = e.node, fakeNode(t, t.TempDir())
	cfg := fmt.Sprintf(`{"fake": {"devices": [%q, %q], "pool": {"devices": [{"nodes": [%q]}, {"nodes": [%q]}]}}}`, n0, n1, n0, n1)
	if err := os.WriteFile(filepath.Join(e.qdir, "resources.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return e, n0, n1
}

// poolJob starts a root hold of one device of the pool, without a cgroup
// (so without its device filter), running script.
func (e *guardEnv) poolJob(t *testing.T, script string) *started {
	t.Helper()
	return rig{}.start(t, e.qdir, newMark(t), e.scratch, "-r", "fake", "--count", "1", "--cgroup=off", "-l", "pooljob", "-g", "1s", "--", "bash", "-c", script)
}
