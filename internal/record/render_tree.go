// render_tree.go owns the tree rendering of a record, like pstree: the
// hold's header, then each process under the one that forked it with its
// command, lifetime, fate and flags, then what was left alive and who
// reaped it. Colour is the caller's choice (TreeOptions.Color).
package record

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/termsafe"
)

// TreeOptions configure RenderTree.
type TreeOptions struct {
	// Color adds ANSI colours (for a terminal).
	Color bool
}

// RenderTree writes rec as a process tree.
func RenderTree(w io.Writer, rec *Record, opts TreeOptions) error {
	bw := bufio.NewWriter(w)
	t := &treeWriter{w: bw, rec: rec, color: opts.Color, origin: recordOrigin(rec)}
	t.header()
	t.tree()
	t.footer()
	return bw.Flush()
}

type treeWriter struct {
	w      *bufio.Writer
	rec    *Record
	color  bool
	origin time.Time
}

const (
	cBold    = "1"
	cDim     = "2"
	cRed     = "31"
	cGreen   = "32"
	cYellow  = "33"
	cMagenta = "35"
	cCyan    = "36"
	cGrey    = "90"
	cBoldRed = "1;31"
)

func (t *treeWriter) c(code, s string) string {
	if !t.color || s == "" {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

func (t *treeWriter) printf(format string, a ...any) { fmt.Fprintf(t.w, format, a...) }

// recordOrigin is the instant offsets count from: the payload's start,
// else the first process seen, else the grant or the queueing.
func recordOrigin(rec *Record) time.Time {
	h := rec.Hold.Times
	if !h.PayloadStart.IsZero() {
		return h.PayloadStart
	}
	var first time.Time
	for _, p := range rec.Processes {
		if !p.FirstSeen.IsZero() && (first.IsZero() || p.FirstSeen.Before(first)) {
			first = p.FirstSeen
		}
	}
	for _, t := range []time.Time{first, h.Granted, h.Queued, rec.Last} {
		if !t.IsZero() {
			return t
		}
	}
	return time.Time{}
}

// offset formats t relative to the origin: "+1.234s", "-2m03.000s".
func (t *treeWriter) offset(at time.Time) string {
	if at.IsZero() || t.origin.IsZero() {
		return "?"
	}
	d := at.Sub(t.origin)
	sign := "+"
	if d < 0 {
		sign, d = "-", -d
	}
	return sign + fmtDuration(d)
}

func fmtDuration(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%.3fs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%06.3fs", int(d/time.Minute), (d % time.Minute).Seconds())
	default:
		return fmt.Sprintf("%dh%02dm%02ds", int(d/time.Hour), int(d%time.Hour/time.Minute), int(d%time.Minute/time.Second))
	}
}

func (t *treeWriter) header() {
	t.titleLine()
	t.file()
	t.commandLines()
	t.timesLine()
	t.endLine()
	t.notes()
	t.printf("\n")
}

// titleLine is the hold, its ticket and holder, host, backend and seal,
// after the warning when the record's writer is not its holder.
func (t *treeWriter) titleLine() {
	h, w := t.rec.Hold, t.rec.Writer
	if w != nil && w.NotHolder {
		t.printf("%s\n", t.c(cBoldRed, "warning: "+w.Warning))
	}
	title := fmt.Sprintf("hold %s on %s", clip(h.ID, 200), clip(h.Resource, 200))
	if h.Label != "" {
		title += fmt.Sprintf(" %q", h.Label)
	}
	t.printf("%s", t.c(cBold, title))
	if h.Ticket != 0 {
		t.printf(" · ticket %d", h.Ticket)
	}
	t.printf(" · holder %s uid %d", h.Holder, h.UID)
	if w != nil && w.NotHolder {
		t.printf(" (the writer's claim)")
	}
	if h.Host != "" {
		t.printf(" on %s", clip(h.Host, 200))
	}
	if h.Backend != "" {
		t.printf(" · backend %s", clip(h.Backend, 100))
	}
	if h.Seal != "" {
		t.printf(" · seal %s", clip(h.Seal, 100))
	}
	t.printf("\n")
}

// commandLines are the backend's note and the payload's command.
func (t *treeWriter) commandLines() {
	h := t.rec.Hold
	if h.BackendNote != "" {
		t.printf("  note: %s\n", clip(h.BackendNote, 2000))
	}
	if len(h.Cmd) > 0 {
		t.printf("  cmd: %s\n", clip(strings.Join(h.Cmd, " "), 200))
	}
}

// timesLine is the hold's instants, relative to the payload's start.
func (t *treeWriter) timesLine() {
	var times []string
	ht := t.rec.Hold.Times
	if !ht.Queued.IsZero() {
		times = append(times, "queued "+ht.Queued.Local().Format("2006-01-02 15:04:05.000 MST"))
	}
	for _, x := range []struct {
		name string
		at   time.Time
	}{{"granted", ht.Granted}, {"payload", ht.PayloadStart}, {"deadline", ht.Deadline}, {"TERM", ht.TeardownStart}, {"KILL", ht.KillStart}, {"teardown done", ht.TeardownEnd}, {"released", ht.Released}} {
		if !x.at.IsZero() {
			times = append(times, x.name+" "+t.offset(x.at))
		}
	}
	if len(times) > 0 {
		t.printf("  %s\n", strings.Join(times, " · "))
	}
}

// endLine is how the hold ended, and its counts.
func (t *treeWriter) endLine() {
	rec, h := t.rec, t.rec.Hold
	end := "  end: " + t.exitText()
	end += fmt.Sprintf(" · %d processes", len(rec.Processes))
	if c := h.Counters; rec.Ended || c != (Counters{}) {
		end += fmt.Sprintf(" · members %d · lost events %d · map overflow %d", c.Members, c.LostEvents, c.MapOverflow)
	}
	if h.DroppedEvents > 0 {
		end += fmt.Sprintf(" · %d events not recorded", h.DroppedEvents)
	}
	if u := h.Usage; u != nil {
		end += fmt.Sprintf(" · gpu-hold used %.0f ms CPU, %.1f MiB", u.UserMS+u.SysMS, float64(u.MaxRSSKB)/1024)
	}
	t.printf("%s\n", end)
}

// exitText is the hold's exit code and cause, or why there is none.
func (t *treeWriter) exitText() string {
	rec, h := t.rec, t.rec.Hold
	switch {
	case h.ExitCode != nil:
		end := fmt.Sprintf("exit %d", *h.ExitCode)
		if h.Cause != "" {
			end += fmt.Sprintf(" (%s", clip(string(h.Cause), 100))
			if h.Signal != 0 {
				end += ", " + SignalString(h.Signal)
			}
			end += ")"
		}
		return end
	case rec.Ended:
		return "no exit code written"
	case rec.Running:
		return t.c(cGreen, fmt.Sprintf("none yet: running (its gpu-hold, pid %d, is alive); the lineage so far", h.Holder.PID))
	}
	return t.c(cBoldRed, "none: the holder died before its end line")
}

// notes are the hold's error, a cut last line, and the dead holders it
// reaped before its payload.
func (t *treeWriter) notes() {
	rec, h := t.rec, t.rec.Hold
	if h.Error != "" {
		t.printf("  error: %s\n", t.c(cRed, clip(h.Error, 2000)))
	}
	if rec.Truncated {
		t.printf("  %s\n", t.c(cYellow, "the last line was cut short (the writer was killed) and is left out"))
	}
	for _, r := range h.Reaped {
		t.printf("  before its payload, ended dead holder %s's lineage (hold %s): %d ended", r.Holder, clip(r.HoldID, 200), r.Ended)
		if len(r.Survivors) > 0 {
			t.printf(", %d survivors", len(r.Survivors))
		}
		if r.Error != "" {
			t.printf(", error: %s", clip(r.Error, 2000))
		}
		t.printf("\n")
	}
}

// file says whose file the record is (from its owner, never its content).
func (t *treeWriter) file() {
	w := t.rec.Writer
	switch {
	case w == nil:
	case w.NotHolder:
		t.printf("  file: %s\n", t.c(cRed, "written by "+uidName(w.UID, w.User)+", not by the holder it names"))
	default:
		t.printf("  file: %s\n", w.Owner())
	}
}

func (t *treeWriter) tree() {
	rec := t.rec
	if len(rec.Processes) == 0 {
		t.printf("(no processes recorded)\n")
		return
	}
	children, roots := rec.lineage()
	seen := make([]bool, len(rec.Processes))
	var lasts []bool // for each ancestor level below the root: was it the last child?
	var walk func(i int)
	walk = func(i int) {
		seen[i] = true
		t.printf("%s%s\n", t.c(cDim, treePrefix(lasts)), t.line(i))
		var todo []int
		for _, k := range children[rec.Processes[i].Ident] {
			if !seen[k] {
				todo = append(todo, k)
			}
		}
		for n, k := range todo {
			if !seen[k] {
				lasts = append(lasts, n == len(todo)-1)
				walk(k)
				lasts = lasts[:len(lasts)-1]
			}
		}
	}
	for _, r := range roots {
		walk(r)
	}
	// A parent loop (damaged ids) leaves members no root reaches.
	for i := range rec.Processes {
		if !seen[i] {
			walk(i)
		}
	}
}

// treePrefix draws the branches before a process; deep lineages show only
// their last levels.
func treePrefix(lasts []bool) string {
	const shown = 24
	var b strings.Builder
	from := 0
	if len(lasts) > shown {
		from = len(lasts) - shown
		fmt.Fprintf(&b, "⋯%d⋯ ", from)
	}
	for k := from; k < len(lasts); k++ {
		switch {
		case k < len(lasts)-1 && lasts[k]:
			b.WriteString("    ")
		case k < len(lasts)-1:
			b.WriteString("│   ")
		case lasts[k]:
			b.WriteString("└── ")
		default:
			b.WriteString("├── ")
		}
	}
	return b.String()
}

// line is one process: pid, command, lifetime, fate, exit status, flags.
func (t *treeWriter) line(i int) string {
	p := &t.rec.Processes[i]
	var b strings.Builder
	b.WriteString(t.c(cBold, fmt.Sprint(p.PID)))
	b.WriteString(" ")
	if cmd := p.Command(); cmd != "" {
		b.WriteString(clip(cmd, 120))
	} else {
		b.WriteString(t.c(cGrey, "(fork of "+shortName(t.rec, p)+")"))
	}
	b.WriteString("  ")
	b.WriteString(t.offset(p.FirstSeen))
	b.WriteString(" → ")
	if end := p.End(); !end.IsZero() {
		b.WriteString(t.offset(end))
		if !p.FirstSeen.IsZero() {
			b.WriteString(" (" + fmtDuration(max(end.Sub(p.FirstSeen), 0)) + ")")
		}
	} else {
		b.WriteString("?")
	}
	b.WriteString("  ")
	running := p.Fate == FateUnknown && t.rec.Running && p.End().IsZero()
	if running {
		b.WriteString(t.c(cGreen, "running"))
	} else {
		b.WriteString(t.fate(p.Fate))
	}
	if p.ExitStatus != "" && !running {
		st := p.ExitStatus
		if st == "unknown" {
			st = "exit status unknown"
		}
		b.WriteString(" · " + st)
	}
	if len(p.Flags) > 0 {
		b.WriteString("  " + t.c(cCyan, "["+strings.Join(p.Flags, " ")+"]"))
	}
	return b.String()
}

func (t *treeWriter) fate(f Fate) string {
	code := cGrey
	switch f {
	case FateExited:
		code = cGreen
	case FateTerm:
		code = cYellow
	case FateKill:
		code = cRed
	case FateKilledAtBirth:
		code = cMagenta
	case FateSurvivor:
		code = cBoldRed
	}
	return t.c(code, string(f))
}

func (t *treeWriter) footer() {
	rec, h := t.rec, t.rec.Hold
	t.printf("\n")
	if len(h.Survivors) > 0 {
		t.printf("%s %s\n", t.c(cBoldRed, "survivors:"), idents(h.Survivors))
	}
	switch {
	case rec.Running && len(rec.Live) > 0:
		t.printf("%s %s\n", t.c(cGreen, "running (no exit seen yet):"), idents(rec.Live))
	case !rec.Ended && len(rec.Live) > 0:
		t.printf("%s %s\n", t.c(cYellow, "alive when the record stops (no exit seen):"), idents(rec.Live))
	}
	for _, d := range h.DeviceHolders {
		t.printf("%s %s\n", t.c(cRed, "device still held by:"), clip(jsonString(d), 300))
	}
	for _, r := range rec.Reaps {
		t.printf("reaped by %s", r.By)
		if r.Via != "" {
			t.printf(" (%s", clip(r.Via, 100))
			if r.HoldID != "" {
				t.printf(" %s", clip(r.HoldID, 200))
			}
			t.printf(")")
		}
		if !r.Started.IsZero() {
			t.printf(" at %s", r.Started.Local().Format("2006-01-02 15:04:05.000 MST"))
		}
		t.printf(": %d candidates, %d signalled", r.Candidates, r.Signalled)
		if len(r.Survivors) > 0 {
			t.printf(", survivors %s", idents(r.Survivors))
		}
		if r.Error != "" {
			t.printf(", error: %s", clip(r.Error, 2000))
		}
		t.printf("\n")
	}
}

func idents(ids []proc.Ident) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = id.String()
	}
	return clip(strings.Join(s, " "), 2000)
}

// clip cuts s to n runes, marking the cut, and makes control characters
// visible: a payload's argv, or a record another user wrote, cannot drive
// the terminal.
func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		s = string(r[:n]) + "…"
	}
	return termsafe.Text(s)
}

func jsonString(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
