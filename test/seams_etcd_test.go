// seams_etcd_test.go owns the tests of ESCAPES.md's T7 on the fleet queue
// on etcd, with real holds: keys that anyone who may write the prefix puts
// under it (garbage, tickets on no lease or on a lease their name does not
// claim) never wedge the queue, and a holder that lost its lease ends a
// TERM-ignoring payload before a waiter on another host is granted.
package test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/gpu-hold/gpu-hold/internal/etcdtest"
	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/queue"
)

// etcdClient is a plain client of s: what a hostile writer of the prefix
// uses.
func etcdClient(t *testing.T, s *etcdtest.Server) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{s.Endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// plantKeys puts, under prefix's gpu queue, a garbage key that sorts first,
// a well-formed ticket claiming to hold on no lease, and one on a live
// lease of another session that its name does not claim, and returns
// their keys.
func plantKeys(t *testing.T, cli *clientv3.Client, prefix string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lr, err := cli.Grant(ctx, 300)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Revoke(context.Background(), lr.ID) })
	if _, err := cli.Put(ctx, prefix+"/other/q/"+strconv.FormatInt(int64(lr.ID), 16), "x", clientv3.WithLease(lr.ID)); err != nil {
		t.Fatal(err)
	}
	claim, _ := json.Marshal(queue.Ticket{Resource: "gpu", Label: "planted", UID: uidA, Host: "elsewhere",
		Holder: proc.Ident{PID: 1 << 22, Start: 1}, Created: time.Now(), Granted: time.Now()})
	dir := prefix + "/gpu/q/"
	keys := []struct {
		key, val string
		lease    clientv3.LeaseID
	}{
		{dir + "!", "garbage", 0},
		{dir + "1", string(claim), 0},
		{dir + strconv.FormatInt(int64(lr.ID)+1, 16), string(claim), lr.ID},
	}
	var out []string
	for _, k := range keys {
		var opts []clientv3.OpOption
		if k.lease != 0 {
			opts = append(opts, clientv3.WithLease(k.lease))
		}
		if _, err := cli.Put(ctx, k.key, k.val, opts...); err != nil {
			t.Fatal(err)
		}
		out = append(out, k.key)
	}
	return out
}

// startedLogged waits (a bound for "did not hang") until s logged msg.
func startedLogged(t *testing.T, s *started, msg string) {
	t.Helper()
	for deadline := time.Now().Add(slowed(30 * time.Second)); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for _, m := range qLogs(s.Stderr()) {
			if m["message"] == msg {
				return
			}
		}
	}
	t.Fatalf("%v never logged %q:\n%s", s.Args, msg, s.Stderr())
}

// reportedTimes is how many of a hold's log lines name key.
func reportedTimes(stderr, key string) int {
	n := 0
	for _, m := range qLogs(stderr) {
		if s, _ := m["message"].(string); strings.Contains(s, strconv.Quote(key)) {
			n++
		}
	}
	return n
}

// Keys planted ahead of every hold, by a writer of the prefix: a hold as
// one user, with -w, still gets the token; one as another user, waiting
// behind it, gets it next; each hold reports each key once, however many
// times it read the queue.
func TestEtcdPlantedKeysNoWedge(t *testing.T) {
	f := newFleet(t, "proc")
	adminDir(t, adminDir(t, f.Dir, "gpu"), "records") // the resource's directory and records/, as an admin makes them
	s := etcdtest.Start(t)
	const prefix = "/gpu-hold-seams"
	url := s.URL(prefix) + "?ttl=" + strconv.Itoa(fleetTTL)
	planted := plantKeys(t, etcdClient(t, s), prefix)
	mark := newMark(t)
	gofile := filepath.Join(f.Scratch, "go")
	log := filepath.Join(f.Scratch, "inside.log")
	if err := os.WriteFile(log, nil, 0o666); err != nil || os.Chmod(log, 0o666) != nil {
		t.Fatalf("a payload log both users may write: %v", err)
	}
	a := f.A.start(t, f.Dir, mark, "", append([]string{"--queue", url, "-l", "alpha", "-w", "30s", "--"}, qPayload(log, "alpha", gofile)...)...)
	startedLogged(t, a, "payload started")
	b := f.B.start(t, f.Dir, mark, "", append([]string{"--queue", url, "-l", "beta", "-w", "60s", "--"}, qPayload(log, "beta", "")...)...)
	startedLogged(t, b, "waiting for the token")
	if err := os.WriteFile(gofile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, h := range []*started{a, b} {
		if r := h.Wait(90 * time.Second); r.Code != 0 {
			t.Fatalf("%v exited %d behind planted keys, want 0\n%s", h.Args, r.Code, r.Stderr)
		}
	}
	if got := qEntered(log); strings.Join(got, " ") != "alpha beta" {
		t.Errorf("entered %v, want alpha then beta", got)
	}
	for name, h := range map[string]*started{"alpha": a, "beta": b} {
		for _, k := range planted {
			if n := reportedTimes(h.Stderr(), k); n != 1 {
				t.Errorf("%s reported key %q %d times, want once\n%s", name, k, n, h.Stderr())
			}
		}
	}
}

// cutProxy forwards TCP to an etcd until Cut: then it refuses and drops
// every connection, so the holds behind it lose etcd while the rest of
// the fleet still reaches it.
type cutProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func startProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln}
	t.Cleanup(p.Cut)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			go func() { io.Copy(u, c); u.Close() }()
			go func() { io.Copy(c, u); c.Close() }()
		}
	}()
	return p
}

// Endpoint is the proxy's host:port.
func (p *cutProxy) Endpoint() string { return p.ln.Addr().String() }

// Cut closes the listener and every connection.
func (p *cutProxy) Cut() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// lastTick is the latest of the ns timestamps in path, one a line.
func lastTick(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var last int64
	for _, l := range strings.Fields(string(b)) {
		if ns, err := strconv.ParseInt(l, 10, 64); err == nil && ns > last {
			last = ns
		}
	}
	return last
}

// With ttl=3 a --lost-grace that does not fit the lease is refused (exit
// 125, saying what fits); the default is shortened to fit, so a holder
// cut off from etcd ends its TERM-ignoring payload before a waiter on
// another host is granted and starts its own.
func TestEtcdLostGraceFitsLease(t *testing.T) {
	s := etcdtest.Start(t)
	url := s.URL("/gpu-hold-grace") + "?ttl=3"
	dir, mark := t.TempDir(), newMark(t)
	p := startProxy(t, s.Endpoint)
	proxied := "etcd://" + p.Endpoint() + "/gpu-hold-grace?ttl=3"
	scratch := t.TempDir()
	ticks, log := filepath.Join(scratch, "ticks"), filepath.Join(scratch, "inside.log")
	a := newHold(t, dir, mark, append([]string{"--queue", proxied, "-l", "alpha", "--track", "proc", "--"},
		sh(fmt.Sprintf(`trap "" TERM; while :; do date +%%s%%N >> %q; sleep 0.01; done`, ticks))...)...)
	a.Env = []string{"GPU_HOLD_HOSTNAME=hostA"}
	a.Start()
	waitLogged(t, a, "payload started")
	waitFile(t, ticks, 10*time.Second)
	b := newHold(t, dir, mark, append([]string{"--queue", url, "-l", "beta", "--track", "proc", "--"}, qPayload(log, "beta", "")...)...)
	b.Env = []string{"GPU_HOLD_HOSTNAME=hostB"}
	b.Start()
	waitLogged(t, b, "waiting for the token")
	p.Cut()
	if r := a.Wait(60 * time.Second); r.Code != 76 {
		t.Fatalf("holder cut off from etcd exited %d, want 76\n%s", r.Code, r.Stderr)
	}
	if r := b.Wait(60 * time.Second); r.Code != 0 {
		t.Fatalf("waiter exited %d\n%s", r.Code, r.Stderr)
	}
	spans, _ := qReadLog(t, log)
	last, entered := lastTick(t, ticks), spans["beta"].enter
	t.Logf("the lost holder's payload last ran %v before the next one started", time.Duration(entered-last))
	if last >= entered {
		t.Errorf("the lost holder's payload ran %v beside the next host's", time.Duration(last-entered))
	}
	if pids := waitUnmarked(mark, 5*time.Second); len(pids) != 0 {
		t.Errorf("payload left running: %v", pids)
	}
	r := newHold(t, dir, mark, "--queue", url, "--track", "proc", "--lost-grace", "2s", "--", "true").Run(60 * time.Second)
	if r.Code != 125 || !strings.Contains(r.Stderr, "--lost-grace 500ms or less") {
		t.Errorf("--lost-grace 2s with ttl=3: exit %d, want 125 saying what fits\n%s", r.Code, r.Stderr)
	}
}
