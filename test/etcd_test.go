// etcd_test.go owns the tests of the fleet queue on etcd against the
// real binary and a real etcd (internal/etcdserver, a process of its own):
// the table that runs the queue tests on both backends, holds from three
// simulated hosts, and the faults: etcd stopped mid-hold, stopped and
// restarted while a ticket waits, a holder frozen past its lease's TTL,
// and etcd unreachable at start.
package test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/gpu-hold/gpu-hold/internal/etcdtest"
	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/testenv"
	"github.com/gpu-hold/gpu-hold/queue"
)

// fleetTTL is the lease TTL of the tests' fleet queues, in seconds: short
// for quick hand-offs after a kill, long enough that a loaded machine (the
// whole suite on 2 CPUs) does not starve a keep-alive past its deadline.
const fleetTTL = 4

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

// qHost is the simulated host of the i-th hold.
func qHost(i, hosts int) string { return "host" + strconv.Itoa(i%hosts) }

// qHostOf is the simulated host a hold runs with ("" for the real one).
func qHostOf(h *hold) string {
	for _, e := range h.Env {
		if v, ok := strings.CutPrefix(e, "GPU_HOLD_HOSTNAME="); ok {
			return v
		}
	}
	return ""
}

// 24 holds from 3 simulated hosts on one etcd, 3 of them SIGKILLed while
// they hold: never two live holders' payloads inside, granted in ticket
// order, each dead holder's lineage ended by the next hold on its own host.
func TestEtcdThreeHosts(t *testing.T) {
	dir := t.TempDir()
	useEtcd(t, dir, etcdtest.Start(t))
	qStressHosts(t, dir, 24, map[int]bool{3: true, 9: true, 15: true}, 3)
}

// leaseRecord reads the record of the hold labelled label in dir.
func leaseRecord(t *testing.T, dir, label string) map[string]any {
	t.Helper()
	recs, _ := filepath.Glob(filepath.Join(dir, "gpu", "records", "*.jsonl"))
	for _, r := range recs {
		b, _ := os.ReadFile(r)
		var hold map[string]any
		for _, l := range strings.Split(string(b), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && m["type"] == "hold" {
				if h, ok := m["hold"].(map[string]any); ok && h["label"] == label {
					hold = h
				}
			}
		}
		if hold != nil {
			return hold
		}
	}
	t.Fatalf("no record of %s in %s", label, dir)
	return nil
}

// requireLeaseLost checks a hold's record says its lease was lost.
func requireLeaseLost(t *testing.T, dir, label string) {
	t.Helper()
	h := leaseRecord(t, dir, label)
	lease, _ := h["lease"].(map[string]any)
	if h["cause"] != "lease-lost" || lease == nil || lease["lost"] == nil || lease["fence"] == nil {
		t.Errorf("record of %s does not say its lease was lost: cause %v, lease %v", label, h["cause"], lease)
	}
}

// etcd stopped mid-hold: the holder knows within the TTL, ends its
// payload and exits 76, and its record says why.
func TestEtcdStoppedMidHold(t *testing.T) {
	dir, mark := t.TempDir(), newMark(t)
	s := etcdtest.Start(t)
	useEtcd(t, dir, s)
	a := newHold(t, dir, mark, "-l", "alpha", "--track", "proc", "--lost-grace", "500ms", "--", "sleep", "60").Start()
	waitLogged(t, a, "payload started")
	s.Kill()
	t0 := time.Now()
	r := a.Wait(60 * time.Second)
	t.Logf("exited %d, %v after etcd stopped", r.Code, time.Since(t0))
	if r.Code != 76 {
		t.Fatalf("exit %d, want 76 (lease lost)\n%s", r.Code, r.Stderr)
	}
	// The payload dies on TERM: the lost grace (500ms) is a bound, not a wait.
	if el := time.Since(t0); el > fleetTTL*time.Second+time.Second {
		t.Errorf("exited %v after etcd stopped: not within the TTL (%ds) plus the lost grace", el, fleetTTL)
	}
	requireLeaseLost(t, dir, "alpha")
	if pids := waitUnmarked(mark, 5*time.Second); len(pids) != 0 {
		t.Errorf("payload left running: %v", pids)
	}
}

// etcd stopped and restarted while a ticket waits: it keeps its place
// (its lease outlives the outage) and runs once the holder is done.
func TestEtcdRestartWhileWaiting(t *testing.T) {
	dir, mark := t.TempDir(), newMark(t)
	s := etcdtest.Start(t)
	queueEnvs.Store(dir, []string{"GPU_HOLD_QUEUE=" + s.URL("/gpu-hold-test") + "?ttl=15"})
	t.Cleanup(func() { queueEnvs.Delete(dir) })
	gofile := filepath.Join(t.TempDir(), "go")
	log := filepath.Join(t.TempDir(), "inside.log")
	a := newHold(t, dir, mark, append([]string{"-l", "alpha", "--track", "proc", "--"}, qPayload(log, "alpha", gofile)...)...).Start()
	qWaitFor(t, dir, "gpu", "alpha holding", qHeldBy("alpha"))
	b := newHold(t, dir, mark, append([]string{"-l", "beta", "--track", "proc", "--"}, qPayload(log, "beta", "")...)...).Start()
	qWaitFor(t, dir, "gpu", "beta waiting", func(st queue.Status) bool { return len(st.Waiters) == 1 })
	s.Stop()
	time.Sleep(time.Second)
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(gofile, nil, 0o644)
	if r := a.Wait(60 * time.Second); r.Code != 0 {
		t.Errorf("holder exited %d\n%s", r.Code, r.Stderr)
	}
	if r := b.Wait(60 * time.Second); r.Code != 0 {
		t.Fatalf("waiter exited %d after etcd came back\n%s", r.Code, r.Stderr)
	}
	if got := qEntered(log); strings.Join(got, " ") != "alpha beta" {
		t.Errorf("entered %v, want alpha then beta", got)
	}
}

// A holder frozen (SIGSTOP) past its TTL: the next holder starts only
// once the lease can have expired, and the frozen one, thawed, ends its
// payload at once (exit 76) instead of running on.
func TestEtcdHolderFrozen(t *testing.T) {
	dir, mark := t.TempDir(), newMark(t)
	useEtcd(t, dir, etcdtest.Start(t))
	scratch := t.TempDir()
	ticks, log := filepath.Join(scratch, "ticks"), filepath.Join(scratch, "inside.log")
	a := newHold(t, dir, mark, append([]string{"-l", "alpha", "--track", "proc", "--lost-grace", "500ms", "--"},
		sh(fmt.Sprintf(`while :; do date +%%s%%N >> %q; sleep 0.05; done`, ticks))...)...).Start()
	waitLogged(t, a, "payload started")
	b := newHold(t, dir, mark, append([]string{"-l", "beta", "--track", "proc", "--"}, qPayload(log, "beta", "")...)...).Start()
	qWaitFor(t, dir, "gpu", "beta waiting", func(st queue.Status) bool { return len(st.Waiters) == 1 })
	a.Signal(syscall.SIGSTOP)
	stopped := time.Now()
	if r := b.Wait(60 * time.Second); r.Code != 0 {
		t.Fatalf("next holder exited %d\n%s", r.Code, r.Stderr)
	}
	spans, _ := qReadLog(t, log)
	entered := time.Unix(0, spans["beta"].enter)
	// The lease was last renewed at most one interval (TTL/3) before the stop.
	earliest := stopped.Add(fleetTTL*time.Second - fleetTTL*time.Second/3)
	t.Logf("next holder entered %v after the stop", entered.Sub(stopped))
	if entered.Before(earliest) {
		t.Errorf("next holder entered %v after the holder froze: before its lease could have expired", entered.Sub(stopped))
	}
	a.Signal(syscall.SIGCONT)
	thawed := time.Now()
	r := a.Wait(60 * time.Second)
	t.Logf("thawed holder exited %d, %v after the thaw", r.Code, time.Since(thawed))
	if r.Code != 76 {
		t.Fatalf("thawed holder exited %d, want 76\n%s", r.Code, r.Stderr)
	}
	if el := time.Since(thawed); el > 5*time.Second {
		t.Errorf("thawed holder took %v to end its payload: not at once", el)
	}
	requireLeaseLost(t, dir, "alpha")
	if pids := waitUnmarked(mark, 5*time.Second); len(pids) != 0 {
		t.Errorf("payload left running: %v", pids)
	}
}

// etcd unreachable at start: exit 75 within -w with a clear message, the
// command not run, nothing left.
func TestEtcdUnreachable(t *testing.T) {
	dir, mark := t.TempDir(), newMark(t)
	ran := filepath.Join(t.TempDir(), "ran")
	h := newHold(t, dir, mark, append([]string{"--queue", "etcd://127.0.0.1:1/none", "-w", "2s", "--track", "proc", "--"}, sh("touch "+ran)...)...)
	r := h.Run(60 * time.Second)
	if r.Code != 75 || !strings.Contains(r.Stderr, "unreachable") {
		t.Fatalf("exit %d, want 75 saying etcd is unreachable\n%s", r.Code, r.Stderr)
	}
	if r.Elapsed > 10*time.Second {
		t.Errorf("took %v with -w 2s", r.Elapsed)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("the command ran")
	}
	if pids := waitUnmarked(mark, 5*time.Second); len(pids) != 0 {
		t.Errorf("left running: %v", pids)
	}
}

// A held key forged by anyone who may write the prefix, claiming uid 0
// and naming a live hold's id on this host, must not make a root
// successor end that hold's processes: the claim is confirmed against the
// record file's owner first.
func TestEtcdForgedHeldKey(t *testing.T) {
	testenv.NeedRoot(t, "a root successor's reap")
	dir, mark := t.TempDir(), newMark(t)
	s := etcdtest.Start(t)
	queueEnvs.Store(dir, []string{"GPU_HOLD_QUEUE=" + s.URL("/gpu-hold-test") + "?ttl=4&budget=2"})
	t.Cleanup(func() { queueEnvs.Delete(dir) })
	a := newHold(t, dir, mark, "-l", "alpha", "--track", "proc", "--", "sleep", "60").Start()
	waitLogged(t, a, "payload started")
	st := qWaitFor(t, dir, "gpu", "alpha holding", qHeldBy("alpha"))
	host, _ := os.Hostname()
	forged := queue.Ticket{Resource: "gpu", Label: "forged", UID: 0, Host: host, HoldID: st.Holder.HoldID,
		Holder: proc.Ident{PID: 1 << 22, Start: 1}, Created: time.Now(), Granted: time.Now()}
	b, _ := json.Marshal(forged)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{s.Endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "/gpu-hold-test/gpu/held/00000000000000000001", string(b)); err != nil {
		t.Fatal(err)
	}
	r := newHold(t, dir, mark, "-l", "beta", "--track", "proc", "--", "true").Run(60 * time.Second)
	if r.Code != 0 {
		t.Fatalf("successor exited %d\n%s", r.Code, r.Stderr)
	}
	if !strings.Contains(r.Stderr, "cannot be confirmed") {
		t.Errorf("successor did not say the forged ticket was not believed:\n%s", r.Stderr)
	}
	time.Sleep(500 * time.Millisecond)
	payload := 0
	for _, m := range qLogs(a.Stderr()) {
		if m["message"] == "payload started" {
			p, _ := m["pid"].(float64)
			payload = int(p)
		}
	}
	if payload == 0 || !slices.Contains(marked(mark), payload) {
		t.Errorf("the live hold's payload (pid %d) was ended on a forged ticket's word\n%s", payload, a.Stderr())
	}
	a.Signal(syscall.SIGTERM)
	a.Wait(30 * time.Second)
}

// gpu-hold reap on the etcd queue ends a holder's lineage after it was
// SIGKILLed (once its lease took its ticket) and clears its held key.
func TestEtcdReap(t *testing.T) {
	dir, mark := t.TempDir(), newMark(t)
	useEtcd(t, dir, etcdtest.Start(t))
	a := newHold(t, dir, mark, "-l", "alpha", "--track", "proc", "--", "sleep", "60").Start()
	waitLogged(t, a, "payload started")
	a.Signal(syscall.SIGKILL)
	a.Wait(30 * time.Second)
	qWaitFor(t, dir, "gpu", "alpha's lease gone", func(st queue.Status) bool { return st.Holder == nil && len(st.Dead) == 1 })
	if left := marked(mark); len(left) == 0 {
		t.Fatal("the killed holder's payload is gone before the reap: nothing to test")
	}
	r := qCmd(t, dir, "reap")
	if r.Code != 0 || !strings.Contains(r.Stdout, "reaped 1") {
		t.Fatalf("reap: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if pids := waitUnmarked(mark, 5*time.Second); len(pids) != 0 {
		t.Errorf("reap left the dead holder's payload running: %v", pids)
	}
	if st := qStatus(t, dir, "gpu"); len(st.Dead) != 0 || st.Holder != nil {
		t.Errorf("queue after the reap: %+v", st)
	}
}

// waitLogged waits (a bound for "did not hang") until h logged msg.
func waitLogged(t *testing.T, h *hold, msg string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for _, m := range qLogs(h.Stderr()) {
			if m["message"] == msg {
				return
			}
		}
	}
	t.Fatalf("%v never logged %q:\n%s", h.Args, msg, h.Stderr())
}

// --yield and a pool of this host's devices have no etcd side yet: both
// are refused at once, not a keeper that never gives way or a pool that
// hands out one host's devices through a fleet's queue.
func TestEtcdYieldAndPoolRefused(t *testing.T) {
	s := etcdtest.Start(t)
	for _, c := range []struct {
		name, dir string
		args      []string
		want      string
	}{
		{"yield", t.TempDir(), []string{"--yield"}, "--yield works on the directory queue only"},
		{"pool", poolQueueDir(t, 2), nil, "only the directory queue can hand out"},
	} {
		t.Run(c.name, func(t *testing.T) {
			mark := newMark(t)
			useEtcd(t, c.dir, s)
			r := newHold(t, c.dir, mark, append(c.args, "--track", "proc", "--", "true")...).Run(30 * time.Second)
			if r.Code != 125 || !strings.Contains(r.Stderr, c.want) {
				t.Fatalf("exit %d, want 125 saying %q\n%s", r.Code, c.want, r.Stderr)
			}
		})
	}
}

// etcd down for longer than the TTL: the holder ends its payload (76)
// within the TTL; the waiter's place goes with its lease (seen with etcd
// 3.7.3: a kept-alive lease expired right after the restart), so it exits
// 75 saying so and runs nothing, or, should its lease survive, runs in turn.
func TestEtcdOutageLongerThanTTL(t *testing.T) {
	dir, mark := t.TempDir(), newMark(t)
	s := etcdtest.Start(t)
	useEtcd(t, dir, s)
	ran := filepath.Join(t.TempDir(), "ran")
	a := newHold(t, dir, mark, "-l", "alpha", "--track", "proc", "--lost-grace", "500ms", "--", "sleep", "60").Start()
	waitLogged(t, a, "payload started")
	b := newHold(t, dir, mark, append([]string{"-l", "beta", "--track", "proc", "--"}, sh("touch "+ran)...)...).Start()
	qWaitFor(t, dir, "gpu", "beta waiting", func(st queue.Status) bool { return len(st.Waiters) == 1 })
	s.Stop()
	if r := a.Wait(60 * time.Second); r.Code != 76 {
		t.Fatalf("holder exited %d, want 76\n%s", r.Code, r.Stderr)
	}
	time.Sleep(fleetTTL * time.Second) // the outage outlasts every lease's TTL
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	r := b.Wait(60 * time.Second)
	t.Logf("waiter exited %d: %s", r.Code, lastLine(r.Stderr))
	switch {
	case r.Code == 75 && strings.Contains(r.Stderr, "lease expired"):
	case r.Code == 0: // its lease outlived the outage after all: it ran in turn
	default:
		t.Fatalf("waiter exited %d, want 75 saying its lease expired (or 0)\n%s", r.Code, r.Stderr)
	}
	if _, err := os.Stat(ran); (err == nil) != (r.Code == 0) {
		t.Errorf("the waiter's command ran: %v, but it exited %d", err == nil, r.Code)
	}
	requireLeaseLost(t, dir, "alpha")
	if pids := waitUnmarked(mark, 5*time.Second); len(pids) != 0 {
		t.Errorf("left running: %v", pids)
	}
}

// lastLine is s's last non-empty line.
func lastLine(s string) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return l[len(l)-1]
}

// gpu-hold cancel of a running hold on another host (an etcd ticket) is
// refused: the pid the ticket names means nothing on this host.
func TestEtcdCancelOtherHost(t *testing.T) {
	dir, mark := t.TempDir(), newMark(t)
	useEtcd(t, dir, etcdtest.Start(t))
	a := newHold(t, dir, mark, "-l", "alpha", "--track", "proc", "--", "sleep", "60")
	a.Env = append(a.Env, "GPU_HOLD_HOSTNAME=elsewhere")
	a.Start()
	st := qWaitFor(t, dir, "gpu", "alpha holding", qHeldBy("alpha"))
	r := qCmd(t, dir, "cancel", st.Holder.HoldID)
	if r.Code == 0 || !strings.Contains(r.Stderr, "runs on host elsewhere") {
		t.Fatalf("cancel of another host's hold: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if st := qStatus(t, dir, "gpu"); st.Holder == nil || st.Holder.Label != "alpha" {
		t.Fatalf("the hold is gone after a refused cancel: %+v", st)
	}
	a.Signal(syscall.SIGTERM)
	a.Wait(30 * time.Second)
}
