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

	"github.com/gpu-hold/gpu-hold/proc"
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
}

// pidMax bounds Linux pids (2^22): tids above it are never real pids.
const pidMax = 1 << 22

// RenderTimeline writes rec as Chrome trace event JSON.
func RenderTimeline(w io.Writer, rec *Record) error {
	h := rec.Hold
	origin := timelineOrigin(rec)
	us := func(t time.Time) float64 { return float64(t.Sub(origin).Nanoseconds()) / 1e3 }
	end := rec.Last
	for _, t := range []time.Time{h.Times.TeardownEnd, h.Times.Released} {
		if t.After(end) {
			end = t
		}
	}
	tpid := h.Holder.PID
	if tpid <= 0 {
		tpid = 1
	}
	var ev []traceEvent
	meta := func(name string, tid int, args map[string]any) {
		ev = append(ev, traceEvent{Name: name, Ph: "M", Pid: tpid, Tid: tid, Args: args})
	}
	title := fmt.Sprintf("gpu-hold %s on %s", h.ID, h.Resource)
	if h.Label != "" {
		title += " " + h.Label
	}
	meta("process_name", 0, map[string]any{"name": title})

	// Tracks: tid = pid, a reused pid gets pid + k*pidMax.
	tids := make([]int, len(rec.Processes))
	used := map[int]bool{}
	for i, p := range rec.Processes {
		tid := p.PID
		for k := 1; used[tid]; k++ {
			tid = p.PID + k*pidMax
		}
		used[tid] = true
		tids[i] = tid
	}
	holdTid := h.Holder.PID
	if holdTid <= 0 || used[holdTid] {
		holdTid = pidMax + 1
		for used[holdTid] {
			holdTid++
		}
	}
	meta("thread_name", holdTid, map[string]any{"name": fmt.Sprintf("hold (gpu-hold %s)", h.Holder)})
	meta("thread_sort_index", holdTid, map[string]any{"sort_index": 0})

	// The hold's phases, as B/E pairs so that the only X events are processes.
	phase := func(name string, from, to time.Time) {
		if from.IsZero() || to.IsZero() || to.Before(from) {
			return
		}
		ev = append(ev,
			traceEvent{Name: name, Cat: "hold", Ph: "B", Ts: us(from), Pid: tpid, Tid: holdTid},
			traceEvent{Name: name, Cat: "hold", Ph: "E", Ts: us(to), Pid: tpid, Tid: holdTid})
	}
	ht := h.Times
	phase("queued", ht.Queued, ht.Granted)
	payloadEnd := ht.TeardownStart
	if payloadEnd.IsZero() {
		payloadEnd = end
	}
	phase("payload", ht.PayloadStart, payloadEnd)
	phase("teardown", ht.TeardownStart, firstSet(ht.TeardownEnd, end))
	instant := func(name string, at time.Time, tid int, scope string, args map[string]any) {
		if at.IsZero() || at.Before(origin) || at.After(end) {
			return
		}
		ev = append(ev, traceEvent{Name: name, Cat: "hold", Ph: "i", Ts: us(at), Pid: tpid, Tid: tid, S: scope, Args: args})
	}
	instant("deadline", ht.Deadline, holdTid, "g", nil)
	instant("TERM pass", ht.TeardownStart, holdTid, "g", nil)
	instant("KILL pass", ht.KillStart, holdTid, "g", nil)
	instant("released", ht.Released, holdTid, "g", nil)
	for _, r := range rec.Reaps {
		instant("reaped by "+r.By.String(), r.Started, holdTid, "g", map[string]any{"via": r.Via, "hold_id": r.HoldID, "signalled": r.Signalled})
	}

	// Processes, in lineage order: each right after its parent.
	index := map[proc.Ident]int{}
	for i, p := range rec.Processes {
		index[p.Ident] = i
	}
	for n, i := range lineageOrder(rec) {
		p := &rec.Processes[i]
		tid := tids[i]
		meta("thread_name", tid, map[string]any{"name": fmt.Sprintf("%d %s", p.PID, shortName(rec, p))})
		meta("thread_sort_index", tid, map[string]any{"sort_index": n + 1})
		from := p.FirstSeen
		if from.IsZero() {
			from = origin
		}
		to := p.End()
		args := map[string]any{
			"pid": p.PID, "start": p.Start, "fate": p.Fate, "ppid": p.PPID, "pgid": p.PGID, "sid": p.SID,
		}
		if to.IsZero() {
			to = end
			args["end"] = "no exit seen: drawn to the record's end"
		}
		if to.Before(from) {
			to = from
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
		name := p.Command()
		if name == "" {
			name = "(fork of " + shortName(rec, p) + ")"
		}
		dur := float64(to.Sub(from).Nanoseconds()) / 1e3
		ev = append(ev, traceEvent{Name: clip(name, 100), Cat: "process", Ph: "X", Ts: us(from), Dur: &dur, Pid: tpid, Tid: tid, Args: args})
		// The fork, as a flow from the parent's track.
		if p.Parent != nil {
			if pi, ok := index[*p.Parent]; ok && !p.FirstSeen.IsZero() {
				id := fmt.Sprintf("fork-%d", i)
				ev = append(ev,
					traceEvent{Name: "fork", Cat: "fork", Ph: "s", Ts: us(from), Pid: tpid, Tid: tids[pi], ID: id},
					traceEvent{Name: "fork", Cat: "fork", Ph: "f", Bp: "e", Ts: us(from), Pid: tpid, Tid: tid, ID: id})
			}
		}
		switch p.Fate {
		case FateKill:
			instant("KILL", firstSet(p.FateAt, to), tid, "t", nil)
		case FateKilledAtBirth:
			instant("killed at birth", firstSet(p.FateAt, from), tid, "t", nil)
		case FateSurvivor:
			instant("survivor", firstSet(p.FateAt, to), tid, "t", nil)
		}
	}
	return json.NewEncoder(w).Encode(traceDoc{TraceEvents: ev, DisplayTimeUnit: "ms"})
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
	return enc.Encode(rec)
}
