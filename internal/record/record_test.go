// record_test.go tests the record's writer and reader together: a
// synthetic lineage with the shapes a payload takes (execs, setsid, a
// double-forked daemon, a TERM-ignoring child, an exit 3, pid reuse, a
// killed-at-birth fork, a survivor, a procfs-style unknown exit) is written
// and read back, and every process's parent, execs, exit, fate and flags
// are checked.
package record

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/proc"
)

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
func ip(v int) *int       { return &v }
func id(pid int, start uint64) proc.Ident {
	return proc.Ident{PID: pid, Start: start}
}

// Identities of the synthetic lineage.
var (
	idRoot     = id(1000, 100)
	idWorker   = id(1001, 101) // execs sh then worker, exits 3
	idSetsid   = id(1002, 102) // setsid, ends by TERM (fate inferred)
	idMiddle   = id(1003, 103) // double fork: exits at once
	idDaemon   = id(1004, 104) // its child: setsid, reparented to the holder
	idStubborn = id(1005, 105) // ignores TERM: needs KILL
	idReuse    = id(1001, 300) // pid 1001 again, later
	idReuseKid = id(1006, 301) // child of the second 1001
	idBorn     = id(1007, 600) // forked by 1005 after the seal
	idStuck    = id(1008, 106) // uninterruptible: survivor
	idFound    = id(1009, 107) // procfs-style: no fork seen, exit status unknown
	holder     = id(500, 50)
)

func testHold() HoldInfo {
	return HoldInfo{
		ID: "h-test-1", Resource: "gpu", Label: "bench", Ticket: 12, Holder: holder, UID: 1000,
		Host: "node1", Cmd: []string{"bash", "-c", "payload"}, Backend: "bpf",
		Times: HoldTimes{Queued: at(-2000), Granted: at(-10)},
	}
}

// lineageEvents is the synthetic payload, in the order a backend sends it.
func lineageEvents() []Event {
	uid := ip(1000)
	ev := func(k Kind, ms int, who proc.Ident, ppid, pgid, sid int) Event {
		return Event{Kind: k, Time: at(ms), Ident: who, PPID: ppid, PGID: pgid, SID: sid, UID: uid}
	}
	exec := func(ms int, who proc.Ident, file string, argv ...string) Event {
		e := Event{Kind: Exec, Time: at(ms), Ident: who, Filename: file, Argv: argv}
		return e
	}
	exit := func(ms int, who proc.Ident, code, sig *int) Event {
		return Event{Kind: Exit, Time: at(ms), Ident: who, ExitCode: code, Signal: sig}
	}
	return []Event{
		// The root is born in the holder's group (400) and moves to its own.
		ev(Fork, 0, idRoot, 500, 400, 900),
		{Kind: Exec, Time: at(1), Ident: idRoot, PGID: 1000, SID: 900, Filename: "/bin/bash", Argv: []string{"bash", "-c", "payload"}},
		ev(Fork, 10, idWorker, 1000, 1000, 900),
		exec(11, idWorker, "/bin/sh", "sh", "-c", "exec /opt/worker"),
		exec(12, idWorker, "/opt/worker", "/opt/worker", "--n", "3"),
		ev(Fork, 20, idSetsid, 1000, 1000, 900),
		ev(Regroup, 21, idSetsid, 1000, 1002, 1002),
		exec(22, idSetsid, "/usr/bin/sleep", "sleep", "300"),
		ev(Fork, 30, idMiddle, 1000, 1000, 900),
		ev(Fork, 31, idDaemon, 1003, 1000, 900),
		exit(32, idMiddle, ip(0), nil),
		ev(Regroup, 33, idDaemon, 500, 1004, 1004),
		exec(34, idDaemon, "/usr/sbin/mydaemon", "mydaemon", "--foreground"),
		ev(Fork, 40, idStubborn, 1000, 1000, 900),
		exec(41, idStubborn, "/usr/bin/sleep", "sleep", "301"),
		ev(Fork, 45, idStuck, 1000, 1000, 900),
		exec(46, idStuck, "/usr/bin/stuck", "stuck"),
		{Kind: Exec, Time: at(50), Ident: idFound, PPID: 1000, PGID: 1000, SID: 900, Filename: "/usr/bin/cat", Argv: []string{"cat"}},
		exit(2000, idWorker, ip(3), nil),
		ev(Fork, 2500, idReuse, 1000, 1000, 900),
		ev(Fork, 2510, idReuseKid, 1001, 1000, 900),
		exec(2511, idReuseKid, "/usr/bin/true", "true"),
		exit(2520, idReuseKid, ip(0), nil),
		exit(2530, idReuse, ip(0), nil),
		exit(3000, idFound, nil, nil),
		// Seen gone by the backend without a status, then reported again
		// by the hold, with the status it reaped, after the teardown began.
		exit(5000, idRoot, nil, nil),
		exit(5050, idRoot, ip(0), nil),
		// teardown: TERM at 5001
		exit(5100, idSetsid, nil, ip(15)),
		exit(5200, idDaemon, nil, ip(15)),
		// KILL pass at 7001
		ev(KilledAtBirth, 7002, idBorn, 1005, 1000, 900),
		exit(7003, idBorn, nil, ip(9)),
		exit(7010, idStubborn, nil, ip(9)),
	}
}

// writeLineage writes the synthetic record the way a hold would, with the
// tracker's sink and the hold writing from different goroutines.
func writeLineage(t testing.TB, path string) {
	t.Helper()
	w, err := CreateRecord(path, testHold())
	if err != nil {
		t.Fatal(err)
	}
	evs := lineageEvents()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the hold, meanwhile
		defer wg.Done()
		w.Update(func(h *HoldInfo) {
			h.Times.PayloadStart = at(0)
			h.Times.Deadline = at(60000)
			h.Payload = &idRoot
			h.PGID, h.SID = 1000, ip(900)
		})
	}()
	for _, e := range evs {
		w.Event(e)
	}
	wg.Wait()
	w.Update(func(h *HoldInfo) { h.Times.TeardownStart = at(5001) })
	w.Fate(idDaemon, FateTerm, at(5200))
	w.Update(func(h *HoldInfo) { h.Times.KillStart = at(7001) })
	w.Fate(idStubborn, FateKill, at(7001))
	w.Fate(idStuck, FateSurvivor, at(9000))
	w.Update(func(h *HoldInfo) {
		h.Times.TeardownEnd = at(9001)
		h.Times.Released = at(9002)
		h.ExitCode, h.Cause = ip(0), CauseExited
		h.Survivors = []proc.Ident{idStuck}
		h.Counters = Counters{Members: 11}
		h.Usage = &Usage{UserMS: 30.4, SysMS: 11.7, MaxRSSKB: 20480}
		h.DeviceHolders = []any{map[string]any{"pid": 4242, "comm": "nvtop", "device": "/dev/nvidia0"}}
	})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

type want struct {
	parent *proc.Ident
	execs  []string // filenames
	status string
	fate   Fate
	flags  []string
}

func TestRecordRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "records", "h-test-1.jsonl")
	writeLineage(t, path)
	rec, err := ReadRecord(path)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Version != RecordVersion || !rec.Ended || rec.Truncated {
		t.Fatalf("version %d ended %v truncated %v", rec.Version, rec.Ended, rec.Truncated)
	}
	h := rec.Hold
	if h.ID != "h-test-1" || h.Resource != "gpu" || h.Ticket != 12 || h.Holder != holder || h.Cause != CauseExited ||
		h.ExitCode == nil || *h.ExitCode != 0 || !h.Times.KillStart.Equal(at(7001)) || h.Payload == nil || len(h.DeviceHolders) != 1 ||
		h.Usage == nil || *h.Usage != (Usage{UserMS: 30.4, SysMS: 11.7, MaxRSSKB: 20480}) {
		t.Fatalf("hold header not read back whole: %+v", h)
	}
	wants := map[proc.Ident]want{
		idRoot:     {nil, []string{"/bin/bash"}, "exit 0", FateExited, nil},
		idWorker:   {&idRoot, []string{"/bin/sh", "/opt/worker"}, "exit 3", FateExited, nil},
		idSetsid:   {&idRoot, []string{"/usr/bin/sleep"}, "signal 15 (SIGTERM)", FateTerm, []string{FlagLeftGroup, FlagLeftSession, FlagReparented}},
		idMiddle:   {&idRoot, nil, "exit 0", FateExited, nil},
		idDaemon:   {&idMiddle, []string{"/usr/sbin/mydaemon"}, "signal 15 (SIGTERM)", FateTerm, []string{FlagLeftGroup, FlagLeftSession, FlagReparented}},
		idStubborn: {&idRoot, []string{"/usr/bin/sleep"}, "signal 9 (SIGKILL)", FateKill, []string{FlagReparented}},
		idStuck:    {&idRoot, []string{"/usr/bin/stuck"}, "", FateSurvivor, []string{FlagReparented}},
		idFound:    {&idRoot, []string{"/usr/bin/cat"}, "unknown", FateExited, nil},
		idReuse:    {&idRoot, nil, "exit 0", FateExited, nil},
		idReuseKid: {&idReuse, []string{"/usr/bin/true"}, "exit 0", FateExited, nil},
		idBorn:     {&idStubborn, nil, "signal 9 (SIGKILL)", FateKilledAtBirth, nil},
	}
	if len(rec.Processes) != len(wants) {
		t.Fatalf("%d processes, want %d", len(rec.Processes), len(wants))
	}
	for i, p := range rec.Processes {
		if i > 0 && rec.Processes[i-1].Start > p.Start {
			t.Errorf("processes not sorted by start: %v before %v", rec.Processes[i-1].Ident, p.Ident)
		}
		w, ok := wants[p.Ident]
		if !ok {
			t.Errorf("unexpected process %v", p.Ident)
			continue
		}
		if (w.parent == nil) != (p.Parent == nil) || (w.parent != nil && *w.parent != *p.Parent) {
			t.Errorf("%v: parent %v, want %v", p.Ident, p.Parent, w.parent)
		}
		var execs []string
		for _, e := range p.Execs {
			execs = append(execs, e.Filename)
		}
		if !slices.Equal(execs, w.execs) {
			t.Errorf("%v: execs %q, want %q", p.Ident, execs, w.execs)
		}
		if p.ExitStatus != w.status {
			t.Errorf("%v: exit status %q, want %q", p.Ident, p.ExitStatus, w.status)
		}
		if p.Fate != w.fate {
			t.Errorf("%v: fate %q, want %q", p.Ident, p.Fate, w.fate)
		}
		if !slices.Equal(p.Flags, w.flags) {
			t.Errorf("%v: flags %q, want %q", p.Ident, p.Flags, w.flags)
		}
	}
	worker := rec.Process(idWorker)
	if worker.ExitCode == nil || *worker.ExitCode != 3 || worker.Command() != "/opt/worker --n 3" {
		t.Errorf("worker: exit %v command %q", worker.ExitCode, worker.Command())
	}
	if p := rec.Process(idSetsid); !p.FateInferred || p.LaterPGIDs[0] != 1002 || p.PGID != 1000 {
		t.Errorf("setsid child: inferred %v pgid %d later %v", p.FateInferred, p.PGID, p.LaterPGIDs)
	}
	if p := rec.Process(idDaemon); p.FateInferred || !slices.Equal(p.LaterPPIDs, []int{500}) {
		t.Errorf("daemon: inferred %v later ppids %v", p.FateInferred, p.LaterPPIDs)
	}
	if p := rec.Process(idFound); !slices.Contains(p.Unknown, "exit_status") || !slices.Contains(p.Unknown, "birth") || p.Signal != nil || p.ExitCode != nil {
		t.Errorf("procfs-style process: unknown %v", p.Unknown)
	}
	if p := rec.Process(idRoot); len(p.Unknown) != 0 || !p.ExitTime.Equal(at(5000)) || p.PGID != 400 {
		t.Errorf("root: backend_unknown %v (want none), exit at %v (want the first report), pgid %d", p.Unknown, p.ExitTime, p.PGID)
	}
	if !slices.Equal(rec.Live, []proc.Ident{idStuck}) {
		t.Errorf("live %v, want only the survivor %v", rec.Live, idStuck)
	}
}

func TestRecordArgvBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.jsonl")
	w, err := CreateRecord(path, testHold())
	if err != nil {
		t.Fatal(err)
	}
	argv := make([]string, MaxArgs+10)
	for i := range argv {
		argv[i] = "a"
	}
	argv[0] = strings.Repeat("x", MaxArgLen*3)
	w.Event(Event{Kind: Fork, Time: at(0), Ident: idRoot, PPID: 500})
	w.Event(Event{Kind: Exec, Time: at(1), Ident: idRoot, Filename: strings.Repeat("f", MaxFilenameLen+5), Argv: argv})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rec, err := ReadRecord(path)
	if err != nil {
		t.Fatal(err)
	}
	e := rec.Processes[0].Execs[0]
	if len(e.Argv) != MaxArgs || len(e.Argv[0]) != MaxArgLen || !e.ArgvTruncated || len(e.Filename) != MaxFilenameLen {
		t.Fatalf("argv not bounded: %d args, first %d bytes, truncated %v, filename %d", len(e.Argv), len(e.Argv[0]), e.ArgvTruncated, len(e.Filename))
	}
	if argv[0] != strings.Repeat("x", MaxArgLen*3) {
		t.Fatal("the writer changed the caller's argv")
	}
}

func TestRecordCreateExisting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.jsonl")
	w, err := CreateRecord(path, testHold())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := CreateRecord(path, testHold()); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("second create: %v", err)
	}
}

// TestRecordReap: a holder dies mid-line; a successor finds its record
// locked while it lived, then appends a reap section after cutting off the
// torn line, and the reader shows the reaping.
func TestRecordReap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	w, err := CreateRecord(path, testHold())
	if err != nil {
		t.Fatal(err)
	}
	w.Event(Event{Kind: Fork, Time: at(0), Ident: idRoot, PPID: 500, PGID: 1000, SID: 900})
	w.Event(Event{Kind: Fork, Time: at(10), Ident: idSetsid, PPID: 1000, PGID: 1000, SID: 900})
	w.Event(Event{Kind: Regroup, Time: at(11), Ident: idSetsid, PPID: 1000, PGID: 1002, SID: 1002})
	w.Event(Event{Kind: Fork, Time: at(20), Ident: idWorker, PPID: 1000, PGID: 1000, SID: 900})
	w.Event(Event{Kind: Exit, Time: at(30), Ident: idWorker, ExitCode: ip(0)})

	if _, err := AppendRecord(path); !errors.Is(err, ErrRecordBusy) {
		t.Fatalf("append while the holder lives: %v, want ErrRecordBusy", err)
	}
	// The holder is SIGKILLed in the middle of a line.
	w.Flush()
	torn := `{"type":"event","kind":"fork","time":"2025-01-02T03:04:05.04Z","pid":10`
	if _, err := w.f.WriteString(torn); err != nil {
		t.Fatal(err)
	}
	w.die()

	rec, err := ReadRecord(path)
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Truncated || rec.Ended || !slices.Equal(rec.Live, []proc.Ident{idRoot, idSetsid}) {
		t.Fatalf("dead holder's record: truncated %v ended %v live %v", rec.Truncated, rec.Ended, rec.Live)
	}

	a, err := AppendRecord(path)
	if err != nil {
		t.Fatal(err)
	}
	me := id(777, 77)
	a.Reap(ReapInfo{By: me, Via: "hold", HoldID: "h-next", Source: "record", Started: at(60000), Candidates: 2})
	a.Fate(idSetsid, FateKill, at(60100))
	a.Fate(idRoot, FateTerm, at(60050))
	a.Reap(ReapInfo{By: me, Via: "hold", HoldID: "h-next", Source: "record", Started: at(60000), Ended: at(60200), Candidates: 2, Signalled: 2})
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}

	rec, err = ReadRecord(path)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Truncated || rec.Ended {
		t.Errorf("after the reap: truncated %v (the torn line is cut), ended %v (the holder never ended)", rec.Truncated, rec.Ended)
	}
	if len(rec.Reaps) != 1 || rec.Reaps[0].Signalled != 2 || rec.Reaps[0].TornTail != len(torn) || rec.Reaps[0].HoldID != "h-next" {
		t.Fatalf("reaps %+v", rec.Reaps)
	}
	for _, who := range []proc.Ident{idRoot, idSetsid} {
		if p := rec.Process(who); !p.HasFlag(FlagReaped) {
			t.Errorf("%v: flags %v, want reaped", who, p.Flags)
		}
	}
	if p := rec.Process(idSetsid); p.Fate != FateKill || !p.HasFlag(FlagLeftSession) {
		t.Errorf("setsid child after reap: fate %s flags %v", p.Fate, p.Flags)
	}
	if p := rec.Process(idWorker); p.HasFlag(FlagReaped) {
		t.Errorf("worker exited before: must not be flagged reaped")
	}
	// Finished by the reaper: prunable now.
	if done, err := recordFinishedAt(t, path); err != nil || !done {
		t.Errorf("reaped record finished = %v, %v", done, err)
	}
}

// TestRecordAppendUnterminated: a last line whole but without its newline
// gets one before the reap section.
func TestRecordAppendUnterminated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	w, err := CreateRecord(path, testHold())
	if err != nil {
		t.Fatal(err)
	}
	w.f.WriteString(`{"type":"event","kind":"fork","pid":1000,"start":100,"ppid":500}`)
	w.f.Close()
	a, err := AppendRecord(path)
	if err != nil {
		t.Fatal(err)
	}
	a.Reap(ReapInfo{By: id(777, 77)})
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	rec, err := ReadRecord(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Processes) != 1 || len(rec.Reaps) != 1 || rec.Reaps[0].TornTail != 0 {
		t.Fatalf("processes %d reaps %+v", len(rec.Processes), rec.Reaps)
	}
}

func TestRecordConcurrentWriters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.jsonl")
	w, err := CreateRecord(path, testHold())
	if err != nil {
		t.Fatal(err)
	}
	const n, per = 4, 200
	var wg sync.WaitGroup
	for g := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				who := id(10000+g*per+i, uint64(i))
				w.Event(Event{Kind: Fork, Time: at(i), Ident: who, PPID: 1})
				w.Fate(who, FateTerm, at(i+1))
				if i%50 == 0 {
					w.Update(func(h *HoldInfo) { h.Counters.Members++ })
				}
			}
		}()
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rec, err := ReadRecord(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Processes) != n*per || rec.Hold.Counters.Members != n*per/50 {
		t.Fatalf("%d processes, members %d", len(rec.Processes), rec.Hold.Counters.Members)
	}
}

func TestRecordPath(t *testing.T) {
	if got := RecordPath("/q/gpu", "h-1"); got != "/q/gpu/records/h-1.jsonl" {
		t.Fatal(got)
	}
	if got := RecordPath("/q/gpu", "../x"); strings.Contains(got, "/q/x") {
		t.Fatalf("hold id escaped the records dir: %s", got)
	}
}

// TestRecordRootFate: a root whose exit is reported only after the
// teardown began ended on its own when the hold's cause says so.
func TestRecordRootFate(t *testing.T) {
	for _, c := range []struct {
		cause Cause
		fate  Fate
	}{{CauseExited, FateExited}, {CauseSignal, FateExited}, {CauseMaxHold, FateTerm}} {
		path := filepath.Join(t.TempDir(), "r.jsonl")
		w, err := CreateRecord(path, testHold())
		if err != nil {
			t.Fatal(err)
		}
		w.Update(func(h *HoldInfo) { h.Payload = &idRoot })
		w.Event(Event{Kind: Fork, Time: at(0), Ident: idRoot, PPID: 500})
		w.Update(func(h *HoldInfo) { h.Times.TeardownStart = at(100) })
		w.Event(Event{Kind: Exit, Time: at(103), Ident: idRoot, ExitCode: ip(3)})
		w.Update(func(h *HoldInfo) { h.Cause = c.cause })
		w.Close()
		rec, err := ReadRecord(path)
		if err != nil {
			t.Fatal(err)
		}
		if p := rec.Process(idRoot); p.Fate != c.fate {
			t.Errorf("cause %s: root fate %s, want %s", c.cause, p.Fate, c.fate)
		}
	}
}

// TestRecordSessionZero: a hold started by an init that never called setsid
// runs in session 0 (its leader is outside the pid namespace). That 0 is
// the real session: a member that calls setsid has left it, and a member
// that did not has not, whether the hold knew its own session or only saw
// the root's fork.
func TestRecordSessionZero(t *testing.T) {
	for _, holdSID := range []*int{ip(0), nil} {
		path := filepath.Join(t.TempDir(), "r.jsonl")
		w, err := CreateRecord(path, testHold())
		if err != nil {
			t.Fatal(err)
		}
		w.Update(func(h *HoldInfo) { h.Payload, h.PGID, h.SID = &idRoot, 1000, holdSID })
		for _, e := range []Event{
			{Kind: Fork, Time: at(0), Ident: idRoot, PPID: 500, PGID: 400},
			{Kind: Fork, Time: at(10), Ident: idWorker, PPID: 1000, PGID: 1000},
			{Kind: Fork, Time: at(20), Ident: idSetsid, PPID: 1000, PGID: 1000},
			{Kind: Regroup, Time: at(21), Ident: idSetsid, PPID: 1000, PGID: 1002, SID: 1002},
			{Kind: Exit, Time: at(30), Ident: idFound, ExitCode: ip(0)},
		} {
			w.Event(e)
		}
		w.Close()
		rec, err := ReadRecord(path)
		if err != nil {
			t.Fatal(err)
		}
		name := "hold sid 0"
		if holdSID == nil {
			name = "hold sid unknown"
		}
		if p := rec.Process(idSetsid); !slices.Contains(p.Flags, FlagLeftSession) {
			t.Errorf("%s: the setsid member's flags are %v, want %s", name, p.Flags, FlagLeftSession)
		}
		for _, who := range []proc.Ident{idRoot, idWorker} {
			p := rec.Process(who)
			if slices.Contains(p.Flags, FlagLeftSession) {
				t.Errorf("%s: pid %d never called setsid, yet its flags are %v", name, who.PID, p.Flags)
			}
			if slices.Contains(p.Unknown, "sid") {
				t.Errorf("%s: pid %d's fork was seen with session 0, yet its sid is called unknown", name, who.PID)
			}
		}
		if p := rec.Process(idFound); !slices.Contains(p.Unknown, "sid") {
			t.Errorf("%s: pid %d was only seen exiting, yet its sid is not called unknown (%v)", name, idFound.PID, p.Unknown)
		}
	}
}

// die is the writer's holder killed after its last batch was written: the
// file is closed without the end line.
func (w *RecordWriter) die() {
	w.Flush()
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.f.Close()
}

// A batch of lines reaches the file within flushDelay, without a header
// update or Close to push it: a holder killed later leaves it all.
func TestRecordBatchWrittenWithoutClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.jsonl")
	w, err := CreateRecord(path, testHold())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for i := range 100 {
		w.Event(Event{Kind: Fork, Time: at(i), Ident: id(2000+i, uint64(i+1)), PPID: 1000})
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(flushDelay) {
		rec, err := ReadRecord(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(rec.Processes) == 100 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("5 s after 100 events, the file holds %d of them: batches are not written without Close", len(rec.Processes))
		}
	}
}
