// reap_test.go owns E10 of ESCAPES.md: the hold itself is SIGKILLed while
// its payload runs, and the dead holder's lineage must be ended before
// anything else uses the token: by the next hold, before its own payload
// starts, or by `gpu-hold reap`. Both records must say so.
package test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/cprog"
)

// e10Tree is hold A's payload: a setsid'd TERM-ignoring child, a
// double-forked TERM-ignoring daemon, and the root waiting on them.
const e10Tree = `setsid bash -c 'trap "" TERM; put c $$; exec sleep 300' &
( setsid bash -c 'trap "" TERM; put daemon $$; exec sleep 300' & )
put root $$
await c; await daemon
put ready 1
wait
`

// e10Scan is hold B's payload: it writes to $GH_T/alive the pids of the
// processes still alive (not zombies) that carry hold A's marker, the
// instant B's payload starts.
func e10Scan(markA string) string {
	return fmt.Sprintf(`alive=
for f in $(grep -lzxF '%s=%s' /proc/[0-9]*/environ 2>/dev/null); do
	p=${f#/proc/}; p=${p%%/environ}
	s=$(sed 's/.*) //' /proc/$p/stat 2>/dev/null | cut -d' ' -f1)
	case "$s" in Z|X|"") ;; *) alive="$alive $p($(cat /proc/$p/comm 2>/dev/null))";; esac
done
put alive "pids:$alive"
`, markEnv, markA)
}

// deadHolder is hold A once it was SIGKILLed with its payload running.
type deadHolder struct {
	mark   string
	id     string // hold id
	record string // record path
	pid    int    // the gpu-hold process
	ticket uint64
	pids   map[string]int // the payload's named processes
}

// startAndKill starts hold A with payload and SIGKILLs the gpu-hold process
// once ready(h) returns; then it calls killed (if not nil) and reads the pids
// of names from the scratch dir d.
func startAndKill(t *testing.T, rg rig, q, d, payload string, names []string, ready func(h *started), killed func()) *deadHolder {
	t.Helper()
	a := &deadHolder{mark: newMark(t), pids: map[string]int{}}
	h := rg.start(t, q, a.mark, d, holdArgs(script(t, d, "a.sh", payload), "-g", "1s")...)
	ready(h)
	h.Signal(syscall.SIGKILL)
	r := h.Wait(10 * time.Second)
	if r.Code != 128+9 {
		t.Fatalf("hold A exited %d after SIGKILL, want 137\nstderr:\n%s", r.Code, r.Stderr)
	}
	// From here on the payload runs without its holder. Whatever happens,
	// end its lineage before the test goes (a bpf lineage stays pinned).
	t.Cleanup(func() { ghRun(t, "--dir", q, "reap", "-g", "1s", "--survivor-wait", "1s") })
	a.pid = h.Cmd.Process.Pid
	if killed != nil {
		killed()
	}
	for _, n := range names {
		a.pids[n] = readPid(t, filepath.Join(d, n), 10*time.Second)
	}
	recs, _ := filepath.Glob(filepath.Join(q, "gpu", "records", "*.jsonl"))
	if len(recs) != 1 {
		t.Fatalf("want hold A's record alone in the records dir, got %v", recs)
	}
	a.record = recs[0]
	a.id = strings.TrimSuffix(filepath.Base(a.record), ".jsonl")
	lines := logLines(r.Stderr)
	if i := findLog(lines, "token taken"); i >= 0 {
		v, _ := lines[i].num("ticket")
		a.ticket = uint64(v)
	}
	if a.ticket == 0 {
		t.Fatalf("hold A logged no \"token taken\" with its ticket:\n%s", r.Stderr)
	}
	// Test shape: the payload outlived its holder.
	live := marked(a.mark)
	for n, pid := range a.pids {
		if !slices.Contains(live, pid) {
			t.Fatalf("test shape: A's %s (pid %d) is not alive after A was killed; alive: %v", n, pid, live)
		}
	}
	return a
}

// waitRecorded waits until A's record names every pid (procfs records what
// its walks saw), so the reaper has the record's identities to go by.
func waitRecorded(t *testing.T, record string, pids ...int) {
	t.Helper()
	for _, pid := range pids {
		waitRecord(t, record, fmt.Sprintf("pid %d", pid), func(l recLine) bool { return l.Type == "event" && l.PID == pid })
	}
}

// recordNames reports whether an event line of the record names pid.
func recordNames(record string, pid int) bool {
	b, _ := os.ReadFile(record)
	for _, s := range strings.Split(string(b), "\n") {
		var l recLine
		if json.Unmarshal([]byte(s), &l) == nil && l.Type == "event" && l.PID == pid {
			return true
		}
	}
	return false
}

// reapSource is the source a reaper of a dead holder on rg goes by.
func reapSource(rg rig) string {
	if rg.Name == "bpf" {
		return "bpf-pin"
	}
	return "record"
}

// requireReapedRecord checks the dead holder's record after a reap by
// reaper (via "hold" or "reap"): one reap section naming it, and every
// named process of A with a fate written in it. wantHold is the reaper's
// hold id ("" for `gpu-hold reap`).
func requireReapedRecord(t *testing.T, rg rig, a *deadHolder, via string, reaper int, wantHold string, mustKill []string) *recDoc {
	t.Helper()
	doc := showJSON(t, a.record)
	if doc.Ended {
		t.Errorf("A's record has the holder's end line, but A was killed")
	}
	if len(doc.Reaps) != 1 {
		t.Fatalf("A's record has %d reap sections, want 1: %+v", len(doc.Reaps), doc.Reaps)
	}
	rp := doc.Reaps[0]
	if rp.Via != via || rp.By.PID != reaper || rp.HoldID != wantHold || rp.Source != reapSource(rg) {
		t.Errorf("A's reap section: via %q by %d hold %q source %q; want via %q by %d hold %q source %q",
			rp.Via, rp.By.PID, rp.HoldID, rp.Source, via, reaper, wantHold, reapSource(rg))
	}
	if rp.Ended.IsZero() || rp.Ended.Before(rp.Started) || len(rp.Survivors) != 0 || rp.Error != "" {
		t.Errorf("A's reap section did not end cleanly: %+v", rp)
	}
	// Every one of A's processes got a signal from the reaper: they were
	// alive when it came. Signalled counts processes, not signals.
	if rp.Signalled != len(a.pids) {
		t.Errorf("A's reap section says %d signalled; %d of A's processes were alive (%v)", rp.Signalled, len(a.pids), a.pids)
	}
	for n, pid := range a.pids {
		var p *recProc
		for i := range doc.Processes {
			if doc.Processes[i].PID == pid {
				p = &doc.Processes[i]
			}
		}
		switch {
		case p == nil:
			t.Errorf("A's %s (pid %d) is not in A's record", n, pid)
		case !p.has("reaped"):
			t.Errorf("A's %s (pid %d) has no fate written by the reaper: fate %q flags %v", n, pid, p.Fate, p.Flags)
		case slices.Contains(mustKill, n) && p.Fate != "kill":
			t.Errorf("A's TERM-ignoring %s (pid %d) has fate %q, want kill", n, pid, p.Fate)
		case p.Fate != "term" && p.Fate != "kill":
			t.Errorf("A's %s (pid %d) has fate %q, want term or kill", n, pid, p.Fate)
		case rg.Name == "bpf" && p.ExitStatus == "":
			// The pinned lineage kept tracking after A died: its exit
			// events go to A's record through the reaper.
			t.Errorf("A's %s (pid %d) has no exit in A's record, though the reaper read A's pinned lineage (fate %q)", n, pid, p.Fate)
		}
	}
	return doc
}

// E10 (next hold): hold A is SIGKILLed while its payload runs; hold B on the
// same queue must end A's whole lineage before B's payload starts.
//
// Catches: a successor that takes a dead holder's token without reaping
// (A's processes are alive in B's payload's scan); a reap that runs after
// or alongside B's payload (the scan, the log order, the record times); a
// reap that does not follow the setsid'd child or the double-forked daemon
// (procfs: not in the record's live set; bpf: the pinned lineage not used);
// TERM-ignoring members left after the grace; the reaping not told in B's
// log, B's record (reaped) and A's record (reap section, fates).
func TestE10HolderKilledNextHold(t *testing.T) { forBackends(t, true, routeE10NextHold) }

func routeE10NextHold(t *testing.T, rg rig) {
	d, q := rg.dirs(t)
	a := startAndKill(t, rg, q, d, e10Tree, []string{"root", "c", "daemon"}, func(h *started) {
		waitFile(t, filepath.Join(d, "ready"), 10*time.Second)
		waitRecorded(t, recordPathIn(t, q), readPid(t, filepath.Join(d, "root"), time.Second),
			readPid(t, filepath.Join(d, "c"), time.Second), readPid(t, filepath.Join(d, "daemon"), time.Second))
	}, nil)

	markB := newMark(t)
	hb := rg.start(t, q, markB, d, holdArgs(script(t, d, "b.sh", e10Scan(a.mark)), "-g", "1s")...)
	rb := hb.Wait(20 * time.Second)
	requireEnd(t, rb, 0, false)
	requireNoneLeft(t, a.mark)
	requireNoneLeft(t, markB)
	requireAliveScan(t, d)

	// B's log: the dead holder, its lineage ended, then B's payload.
	lines := logLines(rb.Stderr)
	dead, ended, started := findLog(lines, "dead holder:"), findLog(lines, "dead holder's lineage ended"), findLog(lines, "payload started")
	if dead < 0 || ended < 0 || started < 0 || !(dead < ended && ended < started) {
		t.Fatalf("B's log lacks \"dead holder\" < \"dead holder's lineage ended\" < \"payload started\" (lines %d, %d, %d):\n%s", dead, ended, started, rb.Stderr)
	}
	for _, i := range []int{dead, ended} {
		l := lines[i]
		tk, _ := l.num("dead_ticket")
		pid, _ := l.num("dead_pid")
		if uint64(tk) != a.ticket || l.str("dead_hold") != a.id || int(pid) != a.pid {
			t.Errorf("B's %q names ticket %v hold %q pid %v; A was ticket %d hold %s pid %d", l.msg(), tk, l.str("dead_hold"), pid, a.ticket, a.id, a.pid)
		}
	}
	if l := lines[ended]; l.str("source") != reapSource(rg) {
		t.Errorf("B's \"dead holder's lineage ended\" has source %q, want %q", l.str("source"), reapSource(rg))
	}
	if n, _ := lines[ended].num("survivors"); n != 0 {
		t.Errorf("B's \"dead holder's lineage ended\" reports %v survivors", n)
	}
	if n, _ := lines[ended].num("ended"); int(n) != len(a.pids) {
		t.Errorf("B's \"dead holder's lineage ended\" says ended %v; A had %d processes alive", n, len(a.pids))
	}

	// B's record: reaped names A, before B's payload started.
	bdoc := showJSON(t, recordOf(t, rb.Stderr))
	if len(bdoc.Hold.Reaped) != 1 {
		t.Fatalf("B's record header has %d reaped entries, want 1: %+v", len(bdoc.Hold.Reaped), bdoc.Hold.Reaped)
	}
	rh := bdoc.Hold.Reaped[0]
	if rh.HoldID != a.id || rh.Holder.PID != a.pid || rh.Record != a.record || len(rh.Survivors) != 0 || rh.Error != "" {
		t.Errorf("B's reaped[0] = %+v; want hold %s holder %d record %s, no survivors", rh, a.id, a.pid, a.record)
	}
	if rh.Ended != len(a.pids) {
		t.Errorf("B's reaped[0].ended = %d; A had %d processes alive", rh.Ended, len(a.pids))
	}

	// A's record: the reap section names B, and ended before B's payload.
	adoc := requireReapedRecord(t, rg, a, "hold", hb.Cmd.Process.Pid, bdoc.Hold.ID, []string{"c", "daemon"})
	if ps := bdoc.Hold.Times["payload_start"]; ps.IsZero() || len(adoc.Reaps) == 0 || !adoc.Reaps[0].Ended.Before(ps) {
		t.Errorf("A's reap ended at %v, not before B's payload started at %v", adoc.Reaps, ps)
	}
	requireReleased(t, rg, q)
}

// E10 with a hopper: hold A is SIGKILLed while a member forks and exits in
// a loop (in the payload's group; its generations count themselves); hold
// B, with a grace, must end it before its payload runs. A's root dies of
// B's TERM, so by B's KILL pass the group has no leader.
//
// Catches: a reaper that ends only what its walks find. Under procfs
// without a cgroup the hopper's orphans went to init with A and no walk
// finds it: only the payload's group, KILLed through the leader's pidfd
// opened before the leader died, reaches it, and only if the reaper sends
// that KILL although its walks found nothing alive.
func TestE10Hopper(t *testing.T) { forBackends(t, true, routeE10Hopper) }

func routeE10Hopper(t *testing.T, rg rig) {
	prog := cprog.Hopper(t)
	d, q := rg.dirs(t)
	stopHopperAtEnd(t, d)
	tree := `"` + prog + `" "$GH_T/count" "$GH_T/stop" &
put root $$
until [ -s "$GH_T/count" ]; do sleep 0.01; done
put ready 1
exec sleep 300
`
	startAndKill(t, rg, q, d, tree, []string{"root"}, func(*started) { waitFile(t, filepath.Join(d, "ready"), 10*time.Second) }, nil)
	rb := rg.start(t, q, newMark(t), d, holdArgs([]string{"true"}, "-g", "1s")...).Wait(30 * time.Second)
	requireEnd(t, rb, 0, false)
	requireHopperGone(t, d)
}

// recordPathIn returns the one record in q's records dir.
func recordPathIn(t *testing.T, q string) string {
	t.Helper()
	recs, _ := filepath.Glob(filepath.Join(q, "gpu", "records", "*.jsonl"))
	if len(recs) != 1 {
		t.Fatalf("want one record in the records dir, got %v", recs)
	}
	return recs[0]
}

// requireAliveScan checks what B's payload saw of A's processes.
func requireAliveScan(t *testing.T, d string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(d, "alive"))
	if err != nil {
		t.Fatalf("B's payload wrote no scan: %v", err)
	}
	if s := strings.TrimSpace(string(b)); s != "pids:" {
		t.Errorf("A's processes alive when B's payload started: %s", strings.TrimPrefix(s, "pids:"))
	}
}

// E10 (killed at once): hold A is SIGKILLed the moment it logs "payload
// started" (its record names the root, nothing more); only then does the
// payload build its tree, holderless. The next hold must still end it.
//
// Catches: a reaper that goes only by the record's live identities (none
// were recorded): procfs must find the processes that carry the dead hold's
// GPU_HOLD_ID, bpf must use the lineage it pinned before the payload ran.
func TestE10HolderKilledAtLaunch(t *testing.T) { forBackends(t, true, routeE10AtLaunch) }

func routeE10AtLaunch(t *testing.T, rg rig) {
	d, q := rg.dirs(t)
	a := startAndKill(t, rg, q, d, "await go\n"+e10Tree, []string{"root", "c", "daemon"}, func(h *started) {
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(h.Stderr(), `"payload started"`) {
			if time.Now().After(deadline) {
				t.Fatalf("hold A did not start its payload within 10s\nstderr:\n%s", h.Stderr())
			}
			time.Sleep(time.Millisecond)
		}
	}, func() {
		if err := os.WriteFile(filepath.Join(d, "go"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	})
	waitFile(t, filepath.Join(d, "ready"), 10*time.Second)
	// Test shape: A's record names none of the children, born after A died.
	for _, n := range []string{"c", "daemon"} {
		if recordNames(a.record, a.pids[n]) {
			t.Fatalf("test shape: A's record names its %s (pid %d), born after A died", n, a.pids[n])
		}
	}

	markB := newMark(t)
	rb := rg.start(t, q, markB, d, holdArgs(script(t, d, "b.sh", e10Scan(a.mark)), "-g", "1s")...).Wait(20 * time.Second)
	requireEnd(t, rb, 0, false)
	requireAliveScan(t, d)
	requireNoneLeft(t, a.mark)
	requireNoneLeft(t, markB)
	lines := logLines(rb.Stderr)
	ended, started := findLog(lines, "dead holder's lineage ended"), findLog(lines, "payload started")
	if ended < 0 || ended > started {
		t.Fatalf("B's log lacks \"dead holder's lineage ended\" before \"payload started\":\n%s", rb.Stderr)
	}
	if l := lines[ended]; l.str("dead_hold") != a.id || l.str("source") != reapSource(rg) {
		t.Errorf("B's \"dead holder's lineage ended\" names hold %q source %q, want %s %s", l.str("dead_hold"), l.str("source"), a.id, reapSource(rg))
	}
	// What the reaper found outside the record still gets its fate there.
	bdoc := showJSON(t, recordOf(t, rb.Stderr))
	requireReapedRecord(t, rg, a, "hold", bdoc.Hold.Holder.PID, bdoc.Hold.ID, []string{"c", "daemon"})
}

// E10 (gpu-hold reap): hold A is SIGKILLed; `gpu-hold reap` ends its
// lineage and frees the token; a second reap has nothing to do; a reap while
// a live holder holds the token ends nothing and exits 0.
//
// Catches: reap that frees the token without ending the lineage, or ends
// it only partly (the setsid'd child, the daemon); reap that returns before
// the lineage is dead; no reap section in A's record; a reap that reaps
// twice; a reap that takes a live holder for dead and kills its payload.
func TestE10HolderKilledReap(t *testing.T) { forBackends(t, true, routeE10Reap) }

func routeE10Reap(t *testing.T, rg rig) {
	d, q := rg.dirs(t)
	a := startAndKill(t, rg, q, d, e10Tree, []string{"root", "c", "daemon"}, func(h *started) {
		waitFile(t, filepath.Join(d, "ready"), 10*time.Second)
	}, nil)

	// (reap's summary goes through cobra's Printf, to stderr: either
	// stream is accepted.)
	r := ghRun(t, "--dir", q, "--log-format", "json", "reap", "-g", "1s")
	if r.Code != 0 || !strings.Contains(r.Stdout+r.Stderr, "gpu: reaped 1 dead holder(s)") {
		t.Fatalf("gpu-hold reap exited %d, want 0 and \"gpu: reaped 1 dead holder(s)\"\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
	}
	requireNoneLeft(t, a.mark)
	lines := logLines(r.Stderr)
	if i := findLog(lines, "dead holder's lineage ended"); i < 0 || lines[i].str("dead_hold") != a.id || lines[i].str("source") != reapSource(rg) {
		t.Errorf("reap's log lacks \"dead holder's lineage ended\" for hold %s with source %s:\n%s", a.id, reapSource(rg), r.Stderr)
	}
	// The reaping process is gone; its pid is in the section. Read it back
	// and check the rest.
	doc := showJSON(t, a.record)
	if len(doc.Reaps) != 1 {
		t.Fatalf("A's record has %d reap sections, want 1", len(doc.Reaps))
	}
	requireReapedRecord(t, rg, a, "reap", doc.Reaps[0].By.PID, "", []string{"c", "daemon"})
	if doc.Reaps[0].By.PID == a.pid || doc.Reaps[0].By.PID == 0 {
		t.Errorf("A's reap section names reaper %v", doc.Reaps[0].By)
	}

	// Nothing left to reap.
	r = ghRun(t, "--dir", q, "--log-format", "json", "reap", "-g", "1s")
	if r.Code != 0 || !strings.Contains(r.Stdout+r.Stderr, "gpu: no dead holder to reap") || findLog(logLines(r.Stderr), "dead holder") >= 0 {
		t.Errorf("a second reap exited %d; want 0 and \"gpu: no dead holder to reap\" and no dead holder\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if doc := showJSON(t, a.record); len(doc.Reaps) != 1 {
		t.Errorf("after a second reap A's record has %d reap sections, want 1", len(doc.Reaps))
	}

	// The token is free: a live holder C takes it at once; reap does nothing.
	markC := newMark(t)
	hc := rg.start(t, q, markC, d, holdArgs(script(t, d, "c.sh", `put live $$; exec sleep 300`), "-w", "3s", "-g", "1s")...)
	live := readPid(t, filepath.Join(d, "live"), 10*time.Second)
	// Once it runs sleep, put's mv has exited: it is not counted before
	// and gone after (seen once in CI).
	waitComm(t, live, "sleep", 10*time.Second)
	before := marked(markC)
	r = ghRun(t, "--dir", q, "--log-format", "json", "reap", "-g", "1s")
	// Nothing happens, as reap's help says, and that is no failure.
	if r.Code != 0 || !strings.Contains(r.Stdout, "no dead holder to reap (the token is free or its holder alive)") {
		t.Errorf("reap while a live holder holds the token exited %d, want 0 saying there is nothing to reap\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if strings.Contains(r.Stdout+r.Stderr, "reaped") || findLog(logLines(r.Stderr), "dead holder") >= 0 {
		t.Errorf("reap while a live holder holds the token took it for dead:\n%s%s", r.Stdout, r.Stderr)
	}
	if after := marked(markC); !slices.Equal(before, after) || !slices.Contains(after, live) {
		t.Errorf("reap while a live holder holds the token changed its processes: %v before, %v after", before, after)
	}
	if hc.Cmd.Process.Signal(syscall.Signal(0)) != nil {
		t.Errorf("the live holder is gone after reap")
	}
	hc.Signal(syscall.SIGTERM)
	rc := hc.Wait(20 * time.Second)
	requireEnd(t, rc, 143, false)
	if c := logLines(rc.Stderr); findLog(c, "dead holder") >= 0 {
		t.Errorf("C found a dead holder: reap left one behind\n%s", rc.Stderr)
	}
	requireNoneLeft(t, markC)
	requireReleased(t, rg, q)
}
