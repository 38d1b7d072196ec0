// render_test.go tests the renderers on the synthetic lineage of
// record_test.go: the tree's lines, the timeline's Chrome trace JSON and
// the JSON document.
package record

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

func readLineage(t *testing.T) *Record {
	t.Helper()
	path := filepath.Join(t.TempDir(), "h.jsonl")
	writeLineage(t, path)
	rec, err := ReadRecord(path)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func TestRenderTree(t *testing.T) {
	rec := readLineage(t)
	var buf bytes.Buffer
	if err := RenderTree(&buf, rec, TreeOptions{}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	t.Log("\n" + out)
	if strings.Contains(out, "\x1b[") {
		t.Error("colour without TreeOptions.Color")
	}
	lines := strings.Split(out, "\n")
	// Each expected line, in this order, as the start of a line.
	wantLines := []string{
		`hold h-test-1 on gpu "bench" · ticket 12 · holder 500@50 uid 1000 on node1 · backend bpf`,
		"  end: exit 0 (exited) · 11 processes · members 11 · lost events 0 · map overflow 0 · gpu-hold used 42 ms CPU, 20.0 MiB",
		"1000 bash -c payload  +0.000s → +5.000s (5.000s)  exited · exit 0",
		"├── 1001 /opt/worker --n 3  +0.010s → +2.000s (1.990s)  exited · exit 3",
		"├── 1002 sleep 300  +0.020s → +5.100s (5.080s)  term · signal 15 (SIGTERM)  [left-group left-session reparented]",
		"├── 1003 (fork of bash)  +0.030s → +0.032s (0.002s)  exited · exit 0",
		"│   └── 1004 mydaemon --foreground  +0.031s → +5.200s (5.169s)  term · signal 15 (SIGTERM)  [left-group left-session reparented]",
		"├── 1005 sleep 301  +0.040s → +7.010s (6.970s)  kill · signal 9 (SIGKILL)  [reparented]",
		"│   └── 1007 (fork of sleep)  +7.002s → +7.003s (0.001s)  killed-at-birth · signal 9 (SIGKILL)",
		"├── 1008 stuck  +0.045s → ?  survivor  [reparented]",
		"├── 1009 cat  +0.050s → +3.000s (2.950s)  exited · exit status unknown",
		"└── 1001 (fork of bash)  +2.500s → +2.530s (0.030s)  exited · exit 0",
		"    └── 1006 true  +2.510s → +2.520s (0.010s)  exited · exit 0",
		"survivors: 1008@106",
		`device still held by: {"comm":"nvtop","device":"/dev/nvidia0","pid":4242}`,
	}
	i := 0
	for _, l := range lines {
		if i < len(wantLines) && strings.HasPrefix(l, wantLines[i]) {
			i++
		}
	}
	if i < len(wantLines) {
		t.Fatalf("tree lacks (in order) the line %q", wantLines[i])
	}

	buf.Reset()
	if err := RenderTree(&buf, rec, TreeOptions{Color: true}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "\x1b[31mkill\x1b[0m") {
		t.Error("TreeOptions.Color: the kill fate is not red")
	}
}

func TestRenderTreeDeadHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	w, err := CreateRecord(path, testHold())
	if err != nil {
		t.Fatal(err)
	}
	w.Event(Event{Kind: Fork, Time: at(0), Ident: idRoot, PPID: 500, PGID: 1000, SID: 900})
	w.Event(Event{Kind: Exec, Time: at(1), Ident: idRoot, Filename: "/bin/x", Argv: []string{"x\x1b[2J"}})
	w.die()
	rec, err := ReadRecord(path)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	RenderTree(&buf, rec, TreeOptions{})
	out := buf.String()
	for _, s := range []string{"none: the holder died before its end line", "alive when the record stops (no exit seen): 1000@100", `x\x1b[2J`, "unknown"} {
		if !strings.Contains(out, s) {
			t.Errorf("dead holder's tree lacks %q:\n%s", s, out)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Error("a payload's argv reached the terminal as an escape sequence")
	}
}

func TestRenderTimeline(t *testing.T) {
	rec := readLineage(t)
	var buf bytes.Buffer
	if err := RenderTimeline(&buf, rec); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TraceEvents []struct {
			Name string         `json:"name"`
			Ph   string         `json:"ph"`
			Ts   *float64       `json:"ts"`
			Dur  *float64       `json:"dur"`
			Pid  int            `json:"pid"`
			Tid  int            `json:"tid"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("timeline is not JSON: %v", err)
	}
	xs := map[int]int{} // tid -> X events
	names := map[int]string{}
	sortIdx := map[int]float64{}
	instants := map[string]bool{}
	for _, e := range doc.TraceEvents {
		switch e.Ph {
		case "X":
			if e.Ts == nil || e.Dur == nil || *e.Dur < 0 {
				t.Errorf("X event %q without ts/dur", e.Name)
			}
			xs[e.Tid]++
		case "M":
			switch e.Name {
			case "thread_name":
				names[e.Tid], _ = e.Args["name"].(string)
			case "thread_sort_index":
				sortIdx[e.Tid], _ = e.Args["sort_index"].(float64)
			}
		case "i":
			instants[e.Name] = true
		}
	}
	total := 0
	for _, n := range xs {
		total += n
	}
	if total != len(rec.Processes) || len(xs) != len(rec.Processes) {
		t.Fatalf("%d X events on %d tracks for %d processes", total, len(xs), len(rec.Processes))
	}
	for _, p := range rec.Processes {
		tid := p.PID
		if p.Ident == idReuse {
			tid = p.PID + pidMax // the second 1001
		}
		if xs[tid] != 1 || names[tid] == "" {
			t.Errorf("%v: %d X events on track %d named %q", p.Ident, xs[tid], tid, names[tid])
		}
	}
	// Children follow their parent.
	if !(sortIdx[1000] < sortIdx[1003] && sortIdx[1003] < sortIdx[1004] && sortIdx[1004] < sortIdx[1005]) {
		t.Errorf("tracks not in lineage order: %v", sortIdx)
	}
	for _, n := range []string{"TERM pass", "KILL pass", "KILL", "killed at birth", "survivor"} {
		if !instants[n] {
			t.Errorf("no %q instant", n)
		}
	}
	if instants["deadline"] {
		t.Error("a deadline long after the record's end is drawn (it would stretch the timeline)")
	}
}

func TestRenderJSON(t *testing.T) {
	rec := readLineage(t)
	var buf bytes.Buffer
	if err := RenderJSON(&buf, rec); err != nil {
		t.Fatal(err)
	}
	var back Record
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Processes) != len(rec.Processes) || back.Hold.ID != rec.Hold.ID || len(back.Live) != 1 {
		t.Fatalf("JSON document lost data: %d processes, hold %q, live %v", len(back.Processes), back.Hold.ID, back.Live)
	}
	if !strings.Contains(buf.String(), `"fate": "killed-at-birth"`) || !strings.Contains(buf.String(), `"backend_unknown": [`) {
		t.Error("JSON document lacks fate or backend_unknown fields")
	}
}

// A record is anyone's file: its text fields reach root's terminal with
// their control characters shown, never acted on.
func TestRenderTreeShowsNoControlCharacters(t *testing.T) {
	rec := readLineage(t)
	const esc = "\x1b]0;PWNED\x07\x1b[2J\u009b31m"
	h := &rec.Hold
	h.ID, h.Resource, h.Label, h.Host, h.Backend, h.Seal = esc, esc, esc, esc, esc, esc
	h.BackendNote, h.Cause, h.Error = esc, Cause(esc), esc
	h.Reaped = []ReapedHold{{HoldID: esc, Error: esc}}
	rec.Reaps = []ReapInfo{{Via: esc, HoldID: esc, Error: esc}}
	var buf bytes.Buffer
	if err := RenderTree(&buf, rec, TreeOptions{}); err != nil {
		t.Fatal(err)
	}
	if out := buf.String(); strings.ContainsAny(out, "\x1b\x07\u009b") {
		t.Errorf("control characters of the record reach the terminal:\n%q", out)
	}
}
