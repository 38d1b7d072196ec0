// render_timeline.go owns the timeline rendering: Chrome trace event JSON
// that opens in ui.perfetto.dev (and chrome://tracing). Each process is one
// complete ("X") event on its own track (tid = pid), tracks ordered so that
// children follow their parent, with fork flows from parent to child; the
// hold's phases are B/E slices on the holder's track, and TERM, KILL, the
// deadline and the release are instant events.
package record

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/proc"
)

// traceEvent is one Chrome trace event. Times are microseconds.
type traceEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	Ts   float64        `json:"ts"`
	Dur  *float64       `json:"dur,omitempty"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	S    string         `json:"s,omitempty"`
	ID   string         `json:"id,omitempty"`
	Bp   string         `json:"bp,omitempty"`
	Args map[string]any `json:"args,omitempty"`
}

type traceDoc struct {
	TraceEvents     []traceEvent `json:"traceEvents"`
	DisplayTimeUnit string       `json:"displayTimeUnit"`
	// OtherData is the trace's metadata: whose file the record is.
	OtherData map[string]any `json:"otherData,omitempty"`
}

// pidMax bounds Linux pids (2^22): tids above it are never real pids.
const pidMax = 1 << 22

// RenderTimeline writes rec as Chrome trace event JSON.
func RenderTimeline(w io.Writer, rec *Record) error {
	tl := newTimeline(rec)
	tl.tracks()
	tl.holdPhases()
	tl.processes()
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(traceDoc{TraceEvents: tl.ev, DisplayTimeUnit: "ms", OtherData: writerData(rec.Writer)})
}

// writerData is the trace's metadata on whose file the record is.
func writerData(w *Writer) map[string]any {
	if w == nil {
		return nil
	}
	d := map[string]any{"record_writer_uid": w.UID, "record_holder_uid": w.HolderUID, "record_not_holder": w.NotHolder}
	if w.User != "" {
		d["record_writer"] = w.User
	}
	if w.Warning != "" {
		d["warning"] = w.Warning
	}
	return d
}

// timeline is a trace being built: the record, the span it draws, its
// tracks and the events so far.
type timeline struct {
	rec         *Record
	origin, end time.Time
	tpid        int   // the trace's one process
	holdTid     int   // the hold's own track
	tids        []int // each process's track, by index in rec.Processes
	ev          []traceEvent
}

// newTimeline sets the span (from the record's first instant to its last,
// the teardown's end or the release) and names the trace.
func newTimeline(rec *Record) *timeline {
	h := rec.Hold
	tl := &timeline{rec: rec, origin: timelineOrigin(rec), end: rec.Last}
	for _, t := range []time.Time{h.Times.TeardownEnd, h.Times.Released} {
		if t.After(tl.end) {
			tl.end = t
		}
	}
	tl.tpid = h.Holder.PID
	if tl.tpid <= 0 {
		tl.tpid = 1
	}
	title := fmt.Sprintf("gpu-hold %s on %s", h.ID, h.Resource)
	if h.Label != "" {
		title += " " + h.Label
	}
	if w := rec.Writer; w != nil && w.NotHolder {
		title = "[written by " + uidName(w.UID, w.User) + ", not its holder] " + title
	}
	tl.meta("process_name", 0, map[string]any{"name": title})
	return tl
}

func (tl *timeline) us(t time.Time) float64 { return float64(t.Sub(tl.origin).Nanoseconds()) / 1e3 }

func (tl *timeline) meta(name string, tid int, args map[string]any) {
	tl.ev = append(tl.ev, traceEvent{Name: name, Ph: "M", Pid: tl.tpid, Tid: tid, Args: args})
}

// phase is one of the hold's phases, as a B/E pair so that the only X
// events are processes.
func (tl *timeline) phase(name string, from, to time.Time) {
	if from.IsZero() || to.IsZero() || to.Before(from) {
		return
	}
	tl.ev = append(tl.ev,
		traceEvent{Name: name, Cat: "hold", Ph: "B", Ts: tl.us(from), Pid: tl.tpid, Tid: tl.holdTid},
		traceEvent{Name: name, Cat: "hold", Ph: "E", Ts: tl.us(to), Pid: tl.tpid, Tid: tl.holdTid})
}

func (tl *timeline) instant(name string, at time.Time, tid int, scope string, args map[string]any) {
	if at.IsZero() || at.Before(tl.origin) || at.After(tl.end) {
		return
	}
	tl.ev = append(tl.ev, traceEvent{Name: name, Cat: "hold", Ph: "i", Ts: tl.us(at), Pid: tl.tpid, Tid: tid, S: scope, Args: args})
}

// tracks gives each process a track: tid = pid, a reused pid gets pid +
// k*pidMax; and the hold a track of its own.
func (tl *timeline) tracks() {
	h := tl.rec.Hold
	tl.tids = make([]int, len(tl.rec.Processes))
	used := map[int]bool{}
	for i, p := range tl.rec.Processes {
		tid := p.PID
		for k := 1; used[tid]; k++ {
			tid = p.PID + k*pidMax
		}
		used[tid] = true
		tl.tids[i] = tid
	}
	tl.holdTid = h.Holder.PID
	if tl.holdTid <= 0 || used[tl.holdTid] {
		tl.holdTid = pidMax + 1
		for used[tl.holdTid] {
			tl.holdTid++
		}
	}
	tl.meta("thread_name", tl.holdTid, map[string]any{"name": fmt.Sprintf("hold (gpu-hold %s)", h.Holder)})
	tl.meta("thread_sort_index", tl.holdTid, map[string]any{"sort_index": 0})
}

// holdPhases draws the hold's phases on its track, and its instants:
// deadline, TERM, KILL, release, and each reap.
func (tl *timeline) holdPhases() {
	ht := tl.rec.Hold.Times
	tl.phase("queued", ht.Queued, ht.Granted)
	payloadEnd := ht.TeardownStart
	if payloadEnd.IsZero() {
		payloadEnd = tl.end
	}
	tl.phase("payload", ht.PayloadStart, payloadEnd)
	tl.phase("teardown", ht.TeardownStart, firstSet(ht.TeardownEnd, tl.end))
	tl.instant("deadline", ht.Deadline, tl.holdTid, "g", nil)
	tl.instant("TERM pass", ht.TeardownStart, tl.holdTid, "g", nil)
	tl.instant("KILL pass", ht.KillStart, tl.holdTid, "g", nil)
	tl.instant("released", ht.Released, tl.holdTid, "g", nil)
	for _, r := range tl.rec.Reaps {
		tl.instant("reaped by "+r.By.String(), r.Started, tl.holdTid, "g", map[string]any{"via": r.Via, "hold_id": r.HoldID, "signalled": r.Signalled})
	}
}

// processes draws the processes, in lineage order: each right after its
// parent.
func (tl *timeline) processes() {
	index := map[proc.Ident]int{}
	for i, p := range tl.rec.Processes {
		index[p.Ident] = i
	}
	for n, i := range lineageOrder(tl.rec) {
		tl.process(n, i, index)
	}
}

// process draws process i, the n-th in lineage order: its track's name,
// its life as one X event, its fork and its fate.
func (tl *timeline) process(n, i int, index map[proc.Ident]int) {
	rec := tl.rec
	p := &rec.Processes[i]
	tid := tl.tids[i]
	tl.meta("thread_name", tid, map[string]any{"name": fmt.Sprintf("%d %s", p.PID, shortName(rec, p))})
	tl.meta("thread_sort_index", tid, map[string]any{"sort_index": n + 1})
	from := p.FirstSeen
	if from.IsZero() {
		from = tl.origin
	}
	to := p.End()
	args := processArgs(p)
	if to.IsZero() {
		to = tl.end
		args["end"] = "no exit seen: drawn to the record's end"
	}
	if to.Before(from) {
		to = from
	}
	name := p.Command()
	if name == "" {
		name = "(fork of " + shortName(rec, p) + ")"
	}
	dur := float64(to.Sub(from).Nanoseconds()) / 1e3
	tl.ev = append(tl.ev, traceEvent{Name: clip(name, 100), Cat: "process", Ph: "X", Ts: tl.us(from), Dur: &dur, Pid: tl.tpid, Tid: tid, Args: args})
	// The fork, as a flow from the parent's track.
	if p.Parent != nil {
		if pi, ok := index[*p.Parent]; ok && !p.FirstSeen.IsZero() {
			id := fmt.Sprintf("fork-%d", i)
			tl.ev = append(tl.ev,
				traceEvent{Name: "fork", Cat: "fork", Ph: "s", Ts: tl.us(from), Pid: tl.tpid, Tid: tl.tids[pi], ID: id},
				traceEvent{Name: "fork", Cat: "fork", Ph: "f", Bp: "e", Ts: tl.us(from), Pid: tl.tpid, Tid: tid, ID: id})
		}
	}
	switch p.Fate {
	case FateKill:
		tl.instant("KILL", firstSet(p.FateAt, to), tid, "t", nil)
	case FateKilledAtBirth:
		tl.instant("killed at birth", firstSet(p.FateAt, from), tid, "t", nil)
	case FateSurvivor:
		tl.instant("survivor", firstSet(p.FateAt, to), tid, "t", nil)
	}
}

// processArgs are the X event's args: what the record knows of p.
func processArgs(p *Process) map[string]any {
	args := map[string]any{
		"pid": p.PID, "start": p.Start, "fate": p.Fate, "ppid": p.PPID, "pgid": p.PGID, "sid": p.SID,
	}
	if p.Parent != nil {
		args["parent"] = p.Parent.String()
	}
	if p.ExitStatus != "" {
		args["exit_status"] = p.ExitStatus
	}
	if len(p.Flags) > 0 {
		args["flags"] = strings.Join(p.Flags, " ")
	}
	if len(p.Unknown) > 0 {
		args["backend_unknown"] = strings.Join(p.Unknown, " ")
	}
	if len(p.Execs) > 0 {
		var execs []string
		for _, e := range p.Execs {
			execs = append(execs, clip(strings.Join(append([]string{e.Filename}, e.Argv...), " "), 300))
		}
		args["execs"] = execs
	}
	return args
}

// timelineOrigin is the earliest instant the record names.
func timelineOrigin(rec *Record) time.Time {
	var o time.Time
	take := func(t time.Time) {
		if !t.IsZero() && (o.IsZero() || t.Before(o)) {
			o = t
		}
	}
	ht := rec.Hold.Times
	take(ht.Queued)
	take(ht.Granted)
	take(ht.PayloadStart)
	for _, p := range rec.Processes {
		take(p.FirstSeen)
	}
	if o.IsZero() {
		o = rec.Last
	}
	return o
}

// lineageOrder lists process indexes depth first: each parent, then its
// children in start order. Members no root reaches (damaged ids) follow.
func lineageOrder(rec *Record) []int {
	children, roots := rec.lineage()
	seen := make([]bool, len(rec.Processes))
	order := make([]int, 0, len(rec.Processes))
	// An explicit stack: a lineage may be deep.
	var stack []int
	visit := func(r int) {
		stack = append(stack[:0], r)
		for len(stack) > 0 {
			i := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if seen[i] {
				continue
			}
			seen[i] = true
			order = append(order, i)
			kids := children[rec.Processes[i].Ident]
			for _, k := range slices.Backward(kids) {
				if !seen[k] {
					stack = append(stack, k)
				}
			}
		}
	}
	for _, r := range roots {
		visit(r)
	}
	for i := range rec.Processes {
		if !seen[i] {
			visit(i)
		}
	}
	return order
}

// shortName is a process's program name: the base of its last argv[0] or
// filename, else its nearest ancestor's.
func shortName(rec *Record, p *Process) string {
	for n := 0; p != nil && n < 1000; n++ {
		if len(p.Execs) > 0 {
			e := p.Execs[len(p.Execs)-1]
			if len(e.Argv) > 0 && e.Argv[0] != "" {
				return clip(filepath.Base(e.Argv[0]), 40)
			}
			return clip(filepath.Base(e.Filename), 40)
		}
		if p.Parent == nil {
			break
		}
		p = rec.Process(*p.Parent)
	}
	return "?"
}

func firstSet(ts ...time.Time) time.Time {
	for _, t := range ts {
		if !t.IsZero() {
			return t
		}
	}
	return time.Time{}
}

// RenderJSON writes rec as one indented JSON document.
func RenderJSON(w io.Writer, rec *Record) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // a command's && stays &&, not \u0026\u0026
	return enc.Encode(rec)
}
