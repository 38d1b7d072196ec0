// record_test.go owns the lineage record as the real binary writes and
// shows it (issue 5, docs/RECORD.md): a payload builds a known tree of named
// processes, and the record must name every one with its parent, exec
// chain, exit status, fate and flags, under each backend; `show` must render
// it as a tree and as a Chrome trace timeline; a damaged record must give
// an error naming the line. It also owns the helpers reap_test.go shares:
// running gpu-hold's own subcommands, reading JSON log lines, and the
// assembled record (`show --format json`).
package test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// recIdent is a process identity as the record writes it.
type recIdent struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start"`
}

// recDoc is the assembled record: `gpu-hold show --format json`.
type recDoc struct {
	Path      string     `json:"path"`
	Version   int        `json:"version"`
	Hold      recHold    `json:"hold"`
	Processes []recProc  `json:"processes"`
	Live      []recIdent `json:"live"`
	Reaps     []recReap  `json:"reaps"`
	Ended     bool       `json:"ended"`
	Truncated bool       `json:"truncated"`
	Lines     int        `json:"lines"`
}

type recHold struct {
	ID       string               `json:"id"`
	Resource string               `json:"resource"`
	Ticket   uint64               `json:"ticket"`
	Holder   recIdent             `json:"holder"`
	Backend  string               `json:"backend"`
	Seal     string               `json:"seal"`
	Payload  *recIdent            `json:"payload"`
	Times    map[string]time.Time `json:"times"`
	ExitCode *int                 `json:"exit_code"`
	Cause    string               `json:"cause"`
	Reaped   []recReaped          `json:"reaped"`
	Usage    *struct {
		UserMS   float64 `json:"user_ms"`
		SysMS    float64 `json:"sys_ms"`
		MaxRSSKB int64   `json:"max_rss_kb"`
	} `json:"usage"`
}

// recReaped is one entry of a reaper's hold.reaped.
type recReaped struct {
	HoldID    string     `json:"hold_id"`
	Holder    recIdent   `json:"holder"`
	Record    string     `json:"record"`
	At        time.Time  `json:"at"`
	Ended     int        `json:"ended"`
	Survivors []recIdent `json:"survivors"`
	Error     string     `json:"error"`
}

// recReap is a reap section of a dead holder's record.
type recReap struct {
	By         recIdent   `json:"by"`
	Via        string     `json:"via"`
	HoldID     string     `json:"hold_id"`
	Source     string     `json:"source"`
	Started    time.Time  `json:"started"`
	Ended      time.Time  `json:"ended"`
	Candidates int        `json:"candidates"`
	Signalled  int        `json:"signalled"`
	Survivors  []recIdent `json:"survivors"`
	Error      string     `json:"error"`
}

type recProc struct {
	recIdent
	Parent     *recIdent `json:"parent"`
	PPID       int       `json:"ppid"`
	Execs      []recExec `json:"execs"`
	ExitCode   *int      `json:"exit_code"`
	Signal     *int      `json:"signal"`
	ExitStatus string    `json:"exit_status"`
	Fate       string    `json:"fate"`
	Flags      []string  `json:"flags"`
	Unknown    []string  `json:"backend_unknown"`
}

type recExec struct {
	Filename string   `json:"filename"`
	Argv     []string `json:"argv"`
}

// proc returns the process with identity id, or nil.
func (d *recDoc) proc(id recIdent) *recProc {
	for i := range d.Processes {
		if d.Processes[i].recIdent == id {
			return &d.Processes[i]
		}
	}
	return nil
}

func (p *recProc) has(flag string) bool { return slices.Contains(p.Flags, flag) }

// execLines are the process's execs as "filename argv..." strings.
func (p *recProc) execLines() []string {
	var out []string
	for _, e := range p.Execs {
		out = append(out, e.Filename+" "+strings.Join(e.Argv, " "))
	}
	return out
}

// recLine is an event line of a record file, as far as the tests read it.
type recLine struct {
	Type string   `json:"type"`
	Kind string   `json:"kind"`
	PID  int      `json:"pid"`
	St   uint64   `json:"start"`
	PPID int      `json:"ppid"`
	Argv []string `json:"argv"`
}

func (l recLine) is(kind string, id recIdent) bool {
	return l.Type == "event" && l.Kind == kind && l.PID == id.PID && l.St == id.Start
}

func (l recLine) argvHas(s string) bool { return strings.Contains(strings.Join(l.Argv, " "), s) }

// waitRecord waits until a line of the record file at path (streamed while
// the hold runs) satisfies ok.
func waitRecord(t *testing.T, path, what string, ok func(recLine) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		for _, s := range strings.Split(string(b), "\n") {
			var l recLine
			if json.Unmarshal([]byte(s), &l) == nil && ok(l) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the record does not show %s after 10s:\n%s", what, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ghRun runs gpu-hold with args (no payload) and returns what it did.
func ghRun(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	t0 := time.Now()
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("gpu-hold %v did not return within 30s\nstderr:\n%s", args, errb.String())
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("running gpu-hold %v: %v", args, err)
	}
	return result{Code: cmd.ProcessState.ExitCode(), Stdout: out.String(), Stderr: errb.String(), Elapsed: time.Since(t0)}
}

// showJSON reads a record through `gpu-hold show --format json`.
func showJSON(t *testing.T, path string) *recDoc {
	t.Helper()
	r := ghRun(t, "show", path, "--format", "json")
	if r.Code != 0 {
		t.Fatalf("gpu-hold show %s --format json exited %d\nstderr:\n%s", path, r.Code, r.Stderr)
	}
	var d recDoc
	if err := json.Unmarshal([]byte(r.Stdout), &d); err != nil {
		t.Fatalf("show --format json output does not parse: %v\n%s", err, r.Stdout)
	}
	return &d
}

// logLine is one JSON log line of gpu-hold's stderr.
type logLine map[string]any

func (l logLine) msg() string {
	if s, ok := l["message"].(string); ok {
		return s
	}
	s, _ := l["msg"].(string)
	return s
}

func (l logLine) str(k string) string { s, _ := l[k].(string); return s }

func (l logLine) num(k string) (float64, bool) { v, ok := l[k].(float64); return v, ok }

// logLines parses stderr's JSON lines, in order.
func logLines(stderr string) []logLine {
	var out []logLine
	for _, s := range strings.Split(stderr, "\n") {
		var l logLine
		if json.Unmarshal([]byte(s), &l) == nil {
			out = append(out, l)
		}
	}
	return out
}

// findLog returns the index of the first line whose message starts with
// prefix, or -1.
func findLog(lines []logLine, prefix string) int {
	for i, l := range lines {
		if strings.HasPrefix(l.msg(), prefix) {
			return i
		}
	}
	return -1
}

// recordOf returns the record path the "hold ended" line names.
func recordOf(t *testing.T, stderr string) string {
	t.Helper()
	lines := logLines(stderr)
	i := findLog(lines, "hold ended")
	if i < 0 || lines[i].str("record") == "" {
		t.Fatalf("no \"hold ended\" line with a record on stderr:\n%s", stderr)
	}
	return lines[i].str("record")
}

// liveIdent reads pid's identity now, while the process surely runs.
func liveIdent(t *testing.T, pid int) recIdent {
	t.Helper()
	return recIdent{PID: pid, Start: stat(t, pid).Start}
}

// The known tree. The long-lived processes execute programs whose argv[0]
// (exec -a) names them. The exec chain runs bash -> sh -> bash, each step a
// script named for it: procfs sees an exec only on its walks. The exit-4
// child lives 0.6 s as the root's forked copy before it execs bash -c, so
// that procfs surely sees it first under the same command name. So that
// what procfs sees does not depend on how often it walks (a loaded host
// stretches its interval), every step that procfs must see waits until
// the record shows it (the test then writes the file the step waits for),
// and the root exits only once every short-lived process's exit is in the
// record.
const recTreeScript = `put root $$
bash "$GH_T/recchainone.sh" &
setsid bash -c 'put sess $$; exec -a recsess sleep 300' &
( setsid bash -c 'put daemon $$; exec -a recdaemon sleep 300' & put mid $BASHPID; slow xmid ) &
bash -c 'trap "" TERM; put ignore $$; exec -a recignore sleep 300' &
bash -c 'put three $$; slow x3; exit 3' &
( { sleep 0.6; exec bash -c 'put four $$; slow x4; exit 4'; } & )
slow finish
exit 0
`

// recSlow is await with a slower poll: fewer processes for the record.
const recSlow = `slow() { until [ -e "$GH_T/$1" ]; do sleep 0.05; done; }
export -f slow
`

// TestRecordKnownTree: a payload builds a known tree (an exec chain, a
// setsid child, a double-forked daemon, a TERM-ignoring child, children that
// exit 3 and 4, one of them an orphan) and exits, leaving three processes
// to the teardown. The record must name every one.
//
// Catches: a backend that misses a member (setsid'd, reparented); a wrong
// parent (the subreaper or init named instead of the forker); an exec chain
// that keeps only the last program; a lost or invented exit status (procfs
// knows only the status of what the hold reaped itself: the exit-4 orphan);
// fates not written or wrongly inferred (the TERM-ignoring child needed
// KILL, the others died of TERM or had exited before the teardown); missing
// left-session / reparented flags; exit events lost at the end of the hold
// (a member left "live" in a finished record); `show` renderings that drop
// a process or give one process no or two complete events in the timeline.
func TestRecordKnownTree(t *testing.T) { forBackends(t, true, routeRecordTree) }

func routeRecordTree(t *testing.T, rg rig) {
	mark := newMark(t)
	d, q := rg.dirs(t)
	script(t, d, "recchainone.sh", recSlow+`put chain $$; slow c2; exec sh "$GH_T/recchaintwo.sh"`)
	// dash: no prelude.
	if err := os.WriteFile(filepath.Join(d, "recchaintwo.sh"), []byte(`until [ -e "$GH_T/c3" ]; do sleep 0.05; done; exec bash "$GH_T/recchainthree.sh"`), 0o755); err != nil {
		t.Fatal(err)
	}
	script(t, d, "recchainthree.sh", recSlow+`slow c4; exit 0`)
	payload := script(t, d, "root.sh", recSlow+recTreeScript)
	h := rg.start(t, q, mark, d, holdArgs(payload, "-t", "30s", "-g", "1s")...)

	// Identities, read while each surely runs.
	ids := map[string]recIdent{}
	for _, n := range []string{"root", "chain", "sess", "daemon", "mid", "ignore", "three", "four"} {
		ids[n] = liveIdent(t, readPid(t, filepath.Join(d, n), 10*time.Second))
	}
	// Test shape: the setsid child and the daemon left the session; the
	// daemon's parent is the subshell, not the root.
	if st := stat(t, ids["sess"].PID); st.SID != ids["sess"].PID {
		t.Fatalf("test shape: the setsid child is not in a session of its own: %+v", st)
	}
	if st := stat(t, ids["daemon"].PID); st.SID != ids["daemon"].PID || st.PPID != ids["mid"].PID {
		t.Fatalf("test shape: the daemon is not a setsid'd child of the subshell: %+v", st)
	}

	// Drive the tree, each step once the record shows the one before.
	rec := recordPathIn(t, q)
	release := func(name string) {
		if err := os.WriteFile(filepath.Join(d, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i, step := range []string{"recchainone.sh", "recchaintwo.sh", "recchainthree.sh"} {
		waitRecord(t, rec, "the exec of "+step, func(l recLine) bool { return l.is("exec", ids["chain"]) && l.argvHas(step) })
		release([]string{"c2", "c3", "c4"}[i])
	}
	waitRecord(t, rec, "the daemon, forked by the subshell", func(l recLine) bool { return l.is("fork", ids["daemon"]) && l.PPID == ids["mid"].PID })
	release("xmid")
	for _, n := range []string{"sess", "ignore"} {
		waitRecord(t, rec, n, func(l recLine) bool { return l.is("fork", ids[n]) || l.is("exec", ids[n]) })
	}
	// The exit-3 and exit-4 children exit once released: procfs must have
	// seen their bash -c first (a walk may have found them still the
	// root's forked copy, with the same command name).
	for n, arg := range map[string]string{"three": "exit 3", "four": "exit 4"} {
		waitRecord(t, rec, "the exec of "+n, func(l recLine) bool { return l.is("exec", ids[n]) && l.argvHas(arg) })
	}
	release("x3")
	release("x4")
	for _, n := range []string{"chain", "mid", "three", "four"} {
		waitRecord(t, rec, n+"'s exit", func(l recLine) bool { return l.is("exit", ids[n]) })
	}
	release("finish")

	r := h.Wait(20 * time.Second)
	requireEnd(t, r, 0, false)
	requireNoneLeft(t, mark)
	path := recordOf(t, r.Stderr)
	if path != rec {
		t.Errorf("\"hold ended\" names record %s; the records dir holds %s", path, rec)
	}
	doc := showJSON(t, path)

	if doc.Version != 1 || !doc.Ended || doc.Truncated {
		t.Errorf("record version %d, ended %v, truncated %v: want 1, true, false", doc.Version, doc.Ended, doc.Truncated)
	}
	if doc.Hold.Backend != rg.Name {
		t.Errorf("record backend %q, want %q", doc.Hold.Backend, rg.Name)
	}
	if doc.Hold.ExitCode == nil || *doc.Hold.ExitCode != 0 || doc.Hold.Cause != "exited" {
		t.Errorf("record exit %v cause %q, want 0 exited", doc.Hold.ExitCode, doc.Hold.Cause)
	}
	if doc.Hold.Payload == nil || *doc.Hold.Payload != ids["root"] {
		t.Errorf("record payload %v, want the root %v", doc.Hold.Payload, ids["root"])
	}
	if u := doc.Hold.Usage; u == nil || u.UserMS+u.SysMS <= 0 || u.MaxRSSKB <= 0 {
		t.Errorf("record usage %+v: want the hold's own CPU time and peak memory", u)
	}
	for _, id := range doc.Live {
		t.Errorf("the finished hold's record has a member with no exit seen: %+v", doc.proc(id))
	}

	procs := map[string]*recProc{}
	for n, id := range ids {
		p := doc.proc(id)
		if p == nil {
			t.Errorf("%s %v is not in the record", n, id)
			continue
		}
		procs[n] = p
	}
	if len(procs) < len(ids) {
		t.FailNow()
	}

	// Parents. The root has none; its direct children were forked by it
	// (it lives throughout, so procfs sees it as their parent too).
	if p := procs["root"]; p.Parent != nil {
		t.Errorf("the root has parent %v, want none", *p.Parent)
	}
	for _, n := range []string{"chain", "sess", "mid", "ignore", "three"} {
		if p := procs[n]; p.Parent == nil || *p.Parent != ids["root"] {
			t.Errorf("%s's parent is %v, want the root %v", n, p.Parent, ids["root"])
		}
	}
	// The daemon was forked by the subshell, which waits until the record
	// shows that. The exit-4 child's forker (a subshell that exits at once)
	// is seen by bpf only; procfs must then say nothing.
	if p := procs["daemon"]; p.Parent == nil || *p.Parent != ids["mid"] {
		t.Errorf("the daemon's parent is %v, want the subshell %v", p.Parent, ids["mid"])
	}
	switch p := procs["four"]; {
	case p.Parent == nil && rg.Name == "bpf":
		t.Errorf("bpf saw every fork, yet the exit-4 child has no parent")
	case p.Parent != nil:
		if gp := doc.proc(*p.Parent); gp == nil || gp.Parent == nil || *gp.Parent != ids["root"] {
			t.Errorf("the exit-4 child's parent %v is not a child of the root %v", *p.Parent, ids["root"])
		}
	}

	// Exec chains.
	requireExecs(t, "chain", procs["chain"], "recchainone.sh", "recchaintwo.sh", "recchainthree.sh")
	requireExecs(t, "root", procs["root"], "root.sh")
	if rg.Name == "bpf" {
		// bpf sees every exec, setsid's own included.
		requireExecs(t, "sess", procs["sess"], "setsid bash", "put sess", "recsess 300")
		requireExecs(t, "ignore", procs["ignore"], `trap "" TERM`, "recignore 300")
		requireExecs(t, "daemon", procs["daemon"], "setsid bash", "put daemon", "recdaemon 300")
	} else {
		// procfs sees what a process runs when it walks: it may miss
		// the first, short steps, never the program that stays.
		requireExecs(t, "sess", procs["sess"], "recsess 300")
		requireExecs(t, "ignore", procs["ignore"], "recignore 300")
		requireExecs(t, "daemon", procs["daemon"], "recdaemon 300")
	}
	requireExecs(t, "three", procs["three"], "exit 3")
	requireExecs(t, "four", procs["four"], "exit 4")

	// Exit statuses. bpf knows every one. procfs knows what it reaped before
	// the seal (the exit-4 orphan, adopted by the hold, its subreaper; the
	// setsid child, ended by TERM in the grace) and what its walks find as
	// zombies: the TERM-ignoring child, KILLed after the seal, is left
	// unreaped for the hold's exit to hand to init, so its status can come
	// only from its zombie's stat. The exit-3 child, reaped by the root,
	// may be "unknown" (docs/RECORD.md), and a status procfs cannot know
	// must never be guessed.
	requireStatus(t, "four", procs["four"], 4)
	if p := procs["ignore"]; p.Signal == nil || *p.Signal != 9 {
		t.Errorf("the TERM-ignoring child's exit is %q, want signal 9", p.ExitStatus)
	}
	if p := procs["sess"]; p.Signal == nil || *p.Signal != 15 {
		t.Errorf("the setsid child's exit is %q, want signal 15", p.ExitStatus)
	}
	if rg.Name == "bpf" {
		requireStatus(t, "three", procs["three"], 3)
		requireStatus(t, "chain", procs["chain"], 0)
		requireStatus(t, "mid", procs["mid"], 0)
	} else {
		p := procs["three"]
		switch {
		case p.ExitStatus == "unknown":
			if !slices.Contains(p.Unknown, "exit_status") || p.ExitCode != nil || p.Signal != nil {
				t.Errorf("the exit-3 child's status is unknown but backend_unknown %v, exit_code %v, signal %v", p.Unknown, p.ExitCode, p.Signal)
			}
		case p.ExitCode != nil && *p.ExitCode == 3:
		default:
			t.Errorf("procfs gives the exit-3 child exit status %q: want \"unknown\" (or exit 3), never a guess", p.ExitStatus)
		}
	}

	// Fates.
	for n, want := range map[string]string{
		"root": "exited", "sess": "term", "daemon": "term", "ignore": "kill",
		"chain": "exited", "mid": "exited", "three": "exited", "four": "exited",
	} {
		if got := procs[n].Fate; got != want {
			t.Errorf("%s's fate is %q, want %q (exit %q)", n, got, want, procs[n].ExitStatus)
		}
	}
	// Flags.
	for _, n := range []string{"sess", "daemon"} {
		if p := procs[n]; !p.has("left-session") || !p.has("left-group") {
			t.Errorf("%s's flags are %v, want left-session and left-group", n, p.Flags)
		}
	}
	if p := procs["daemon"]; !p.has("reparented") {
		t.Errorf("the daemon's flags are %v, want reparented (its parent exited first)", p.Flags)
	}
	for _, n := range []string{"root", "chain", "three", "ignore"} {
		if p := procs[n]; p.has("left-session") || p.has("left-group") {
			t.Errorf("%s's flags are %v: it never left the payload's group", n, p.Flags)
		}
	}

	t.Run("tree", func(t *testing.T) { requireTree(t, path, doc, ids) })
	t.Run("timeline", func(t *testing.T) { requireTimeline(t, path, doc) })
}

// requireExecs checks that p's execs contain each of want in order (each
// want is a substring of one exec's "filename argv...", and the last want
// is in the last exec).
func requireExecs(t *testing.T, name string, p *recProc, want ...string) {
	t.Helper()
	execs := p.execLines()
	i := 0
	for _, e := range execs {
		if i < len(want) && strings.Contains(e, want[i]) {
			i++
		}
	}
	if i < len(want) || len(execs) == 0 || !strings.Contains(execs[len(execs)-1], want[len(want)-1]) {
		t.Errorf("%s's exec chain is %q, want execs containing %q in order", name, execs, want)
	}
}

func requireStatus(t *testing.T, name string, p *recProc, code int) {
	t.Helper()
	if p.ExitCode == nil || *p.ExitCode != code || p.ExitStatus != "exit "+strconv.Itoa(code) {
		t.Errorf("%s's exit status is %q (exit_code %v), want exit %d", name, p.ExitStatus, p.ExitCode, code)
	}
}

// requireTree checks the tree rendering: every named process on a line of
// its own with its command, each child below and indented under its parent.
func requireTree(t *testing.T, path string, doc *recDoc, ids map[string]recIdent) {
	r := ghRun(t, "show", path, "--color", "never")
	if r.Code != 0 {
		t.Fatalf("gpu-hold show exited %d\nstderr:\n%s", r.Code, r.Stderr)
	}
	if strings.Contains(r.Stdout, "\x1b[") {
		t.Errorf("--color never output has escape sequences")
	}
	lines := strings.Split(r.Stdout, "\n")
	// at returns the line index and the column where pid starts.
	at := func(n string) (int, int) {
		pid := strconv.Itoa(ids[n].PID) + " "
		for i, l := range lines {
			trim := strings.TrimLeft(l, " │├└─")
			if strings.HasPrefix(trim, pid) {
				return i, len([]rune(l)) - len([]rune(trim))
			}
		}
		return -1, -1
	}
	words := map[string]string{"root": "root.sh", "chain": "recchainthree.sh", "sess": "recsess", "daemon": "recdaemon",
		"mid": "", "ignore": "recignore", "three": "exit 3", "four": "exit 4"}
	for n, w := range words {
		i, _ := at(n)
		if i < 0 {
			t.Errorf("the tree has no line for %s (pid %d):\n%s", n, ids[n].PID, r.Stdout)
		} else if !strings.Contains(lines[i], w) {
			t.Errorf("the tree's line for %s lacks %q: %s", n, w, lines[i])
		}
	}
	for _, pc := range [][2]string{{"root", "sess"}, {"root", "ignore"}, {"mid", "daemon"}} {
		pi, pcol := at(pc[0])
		ci, ccol := at(pc[1])
		if pi < 0 || ci < 0 {
			continue
		}
		if ci <= pi || ccol <= pcol {
			t.Errorf("the tree does not show %s (line %d, column %d) under %s (line %d, column %d):\n%s", pc[1], ci, ccol, pc[0], pi, pcol, r.Stdout)
		}
	}
	if _, col := at("root"); col != 0 {
		t.Errorf("the root is indented (column %d)", col)
	}
	if len(doc.Processes) < len(ids) {
		t.Errorf("record has %d processes, fewer than the %d named", len(doc.Processes), len(ids))
	}
}

// requireTimeline checks `--format timeline -o FILE`: Chrome trace JSON
// with exactly one complete event per process of the record.
func requireTimeline(t *testing.T, path string, doc *recDoc) {
	out := filepath.Join(t.TempDir(), "hold.trace.json")
	r := ghRun(t, "show", path, "--format", "timeline", "-o", out)
	if r.Code != 0 {
		t.Fatalf("gpu-hold show --format timeline exited %d\nstderr:\n%s", r.Code, r.Stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("-o %s was not written: %v", out, err)
	}
	var trace struct {
		TraceEvents []struct {
			Ph   string         `json:"ph"`
			Cat  string         `json:"cat"`
			Ts   *float64       `json:"ts"`
			Dur  *float64       `json:"dur"`
			Tid  int            `json:"tid"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(b, &trace); err != nil {
		t.Fatalf("the timeline is not JSON: %v", err)
	}
	if trace.TraceEvents == nil {
		t.Fatalf("the timeline has no \"traceEvents\"")
	}
	seen := map[recIdent]int{}
	tids := map[int]bool{}
	for _, e := range trace.TraceEvents {
		if e.Ph != "X" {
			continue
		}
		pid, _ := e.Args["pid"].(float64)
		start, _ := e.Args["start"].(float64)
		id := recIdent{PID: int(pid), Start: uint64(start)}
		seen[id]++
		if e.Cat != "process" || e.Ts == nil || e.Dur == nil || *e.Ts < 0 || *e.Dur < 0 {
			t.Errorf("complete event for %v: cat %q ts %v dur %v", id, e.Cat, e.Ts, e.Dur)
		}
		if tids[e.Tid] {
			t.Errorf("two complete events on track %d", e.Tid)
		}
		tids[e.Tid] = true
	}
	for _, p := range doc.Processes {
		if n := seen[p.recIdent]; n != 1 {
			t.Errorf("process %v has %d complete events, want 1", p.recIdent, n)
		}
		delete(seen, p.recIdent)
	}
	for id, n := range seen {
		t.Errorf("%d complete event(s) for %v, which is not in the record", n, id)
	}
}

// TestRecordDamaged: `show` on a damaged record fails with exit 125 and an
// error naming the file and the line; a record whose last line was cut short
// (a killed writer) is shown without it, marked truncated.
//
// Catches: a reader that panics or skips damage silently; an error that
// does not say where; a reader that refuses a cut-short last line.
func TestRecordDamaged(t *testing.T) {
	t.Parallel()
	mark := newMark(t)
	q := t.TempDir()
	r := newHold(t, q, mark, "--track=proc", "--cgroup=off", "-g", "1s", "--", "bash", "-c", "sleep 0.3 & sleep 0.3 & wait").Run(20 * time.Second)
	requireEnd(t, r, 0, false)
	good, err := os.ReadFile(recordOf(t, r.Stderr))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(good), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if len(lines) < 6 {
		t.Fatalf("test shape: the record has only %d lines", len(lines))
	}
	mid := len(lines) / 2
	cut := func(l string) string { return l[:len(l)/2] }
	join := func(ls ...[]string) string { return strings.Join(slices.Concat(ls...), "") }

	for _, tc := range []struct {
		name, text string
		line       int // the line the error names; 0: shown, truncated
	}{
		{"cut-mid-file", join(lines[:mid], []string{cut(lines[mid]) + "\n"}, lines[mid+1:]), mid + 1},
		{"garbage-line-2", join(lines[:1], []string{"this is not json\n"}, lines[2:]), 2},
		{"empty-line-2", join(lines[:1], []string{"\n"}, lines[1:]), 2},
		{"cut-last-line", join(lines[:len(lines)-1], []string{cut(lines[len(lines)-1])}), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "rec.jsonl")
			if err := os.WriteFile(p, []byte(tc.text), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, format := range []string{"tree", "json", "timeline"} {
				r := ghRun(t, "show", p, "--format", format, "--color", "never")
				if strings.Contains(r.Stderr, "panic") || strings.Contains(r.Stderr, "goroutine ") {
					t.Fatalf("show --format %s panicked:\n%s", format, r.Stderr)
				}
				if tc.line == 0 {
					if r.Code != 0 {
						t.Errorf("show --format %s of a record whose last line is cut exited %d, want 0\nstderr:\n%s", format, r.Code, r.Stderr)
					}
					continue
				}
				if r.Code != 125 {
					t.Errorf("show --format %s of a damaged record exited %d, want 125\nstderr:\n%s", format, r.Code, r.Stderr)
				}
				if want := "line " + strconv.Itoa(tc.line) + ":"; !strings.Contains(r.Stderr, want) || !strings.Contains(r.Stderr, p) {
					t.Errorf("show --format %s: the error does not name the file and %q:\n%s", format, want, r.Stderr)
				}
				if r.Stdout != "" {
					t.Errorf("show --format %s of a damaged record wrote to stdout:\n%s", format, r.Stdout)
				}
			}
			if tc.line == 0 {
				d := showJSON(t, p)
				if !d.Truncated || d.Lines != len(lines)-1 {
					t.Errorf("record with its last line cut: truncated %v, lines %d; want true, %d", d.Truncated, d.Lines, len(lines)-1)
				}
			}
		})
	}
}
