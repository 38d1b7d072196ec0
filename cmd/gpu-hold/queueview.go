// queueview.go owns what gpu-hold queue shows of a ticket, in its table
// columns (selectable with -o) and its JSON document, whose names each mean
// one thing: "holding" is the ticket that holds the token, "process" the
// gpu-hold process that owns a ticket.
package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/queue"
)

// queueDoc is `gpu-hold queue --json`.
type queueDoc struct {
	Resources []resourceView `json:"resources"`
}

type resourceView struct {
	Resource string      `json:"resource"`
	Holding  *ticketView `json:"holding"` // null: the token is free
	// AlsoHolding are further holders, where the queue's budget allows
	// more than one at once (etcd).
	AlsoHolding []ticketView `json:"also_holding,omitempty"`
	Waiting     []ticketView `json:"waiting"`
	Dead        []ticketView `json:"dead,omitempty"` // died holding, not yet reaped
	Skipped     []string     `json:"skipped,omitempty"`
	// Lockers hold the queue's own locks where no gpu-hold holder
	// explains it (queue.go): every hold waits for them.
	Lockers []lockerView `json:"lockers,omitempty"`
}

// ticketView is one ticket. Times are RFC 3339; durations carry their unit.
type ticketView struct {
	Resource string     `json:"resource"`
	Ticket   uint64     `json:"ticket"`
	State    string     `json:"state"`           // holding, waiting, dead
	Yield    bool       `json:"yield,omitempty"` // a serve keeper's (--yield): gives way to any job
	Position int        `json:"position"`
	Label    string     `json:"label,omitempty"`
	User     string     `json:"user"`
	UID      int        `json:"uid"`
	Host     string     `json:"host,omitempty"`
	Process  proc.Ident `json:"process"` // the gpu-hold process that owns the ticket
	Cmd      []string   `json:"cmd,omitempty"`
	Created  time.Time  `json:"created"`
	Granted  time.Time  `json:"granted,omitzero"`
	MaxHold  string     `json:"max_hold,omitempty"` // a Go duration; absent: no limit
	UsedMS   *int64     `json:"used_ms,omitempty"`  // holding (or dead): since the token was taken
	LeftMS   *int64     `json:"left_ms,omitempty"`  // holding with a max hold: until it runs out
	WaitMS   int64      `json:"wait_ms"`            // waiting: so far; holding: until the token came
	HoldID   string     `json:"hold_id,omitempty"`
	Record   string     `json:"record,omitempty"`
	// Count and Devices: of a pool hold, the devices wanted and held
	// (pool indices, as the holder says them: shown, not believed).
	Count   int   `json:"count,omitempty"`
	Devices []int `json:"devices,omitempty"`
	// Keeping: a holder whose payload ended keeps the token while
	// processes outside its lineage hold the device (its owner's note).
	Keeping *queue.Keeping `json:"keeping,omitempty"`
}

// viewOf is status st as views, now.
func viewOf(st queue.Status, now time.Time) resourceView {
	v := resourceView{Resource: st.Resource, Waiting: []ticketView{}, Skipped: st.Skipped, Lockers: lockersOf(st.Lockers)}
	if st.Holder != nil {
		t := ticketOf(st.Resource, *st.Holder, "holding", 0, now)
		v.Holding = &t
	}
	for _, h := range st.Holders {
		v.AlsoHolding = append(v.AlsoHolding, ticketOf(st.Resource, h, "holding", 0, now))
	}
	for i, w := range st.Waiters {
		v.Waiting = append(v.Waiting, ticketOf(st.Resource, w, "waiting", i+1, now))
	}
	for _, d := range st.Dead {
		v.Dead = append(v.Dead, ticketOf(st.Resource, d, "dead", 0, now))
	}
	return v
}

func ticketOf(res string, t queue.Ticket, state string, pos int, now time.Time) ticketView {
	v := ticketView{Resource: res, Ticket: t.Seq, State: state, Position: pos, Label: t.Label, User: userName(t.UID), UID: t.UID,
		Host: t.Host, Process: t.Holder, Cmd: t.Cmd, Created: t.Created, Granted: t.Granted, HoldID: t.HoldID, Record: t.Record,
		Count: t.Count, Devices: t.Devices, Yield: t.Yield, Keeping: t.Keeping}
	if t.MaxHold > 0 {
		v.MaxHold = t.MaxHold.String()
	}
	ms := func(d time.Duration) *int64 { n := max(d, 0).Milliseconds(); return &n }
	if t.Granted.IsZero() {
		v.WaitMS = *ms(now.Sub(t.Created))
		return v
	}
	v.WaitMS = *ms(t.Granted.Sub(t.Created))
	v.UsedMS = ms(now.Sub(t.Granted))
	if t.MaxHold > 0 && state == "holding" {
		v.LeftMS = ms(t.MaxHold - now.Sub(t.Granted))
	}
	return v
}

// rows are a resource's tickets in table order: dead, holding, waiting.
func (v resourceView) rows() []ticketView {
	out := append([]ticketView{}, v.Dead...)
	if v.Holding != nil {
		out = append(out, *v.Holding)
	}
	out = append(out, v.AlsoHolding...)
	return append(out, v.Waiting...)
}

// column is one column of the table.
type column struct {
	name string // for -o, lower case; the header is its upper case
	cell func(t ticketView) string
}

var columns = []column{
	{"resource", func(t ticketView) string { return cell(t.Resource, 16) }},
	{"pos", func(t ticketView) string {
		if t.State == "waiting" {
			return strconv.Itoa(t.Position)
		}
		return map[string]string{"holding": "0", "dead": "-"}[t.State]
	}},
	{"ticket", func(t ticketView) string { return strconv.FormatUint(t.Ticket, 10) }},
	{"state", func(t ticketView) string {
		if t.Yield {
			return t.State + ",yields"
		}
		return t.State
	}},
	{"label", func(t ticketView) string { return cell(t.Label, 24) }},
	{"user", func(t ticketView) string { return cell(t.User, 16) }},
	{"host", func(t ticketView) string { return cell(t.Host, 20) }},
	{"pid", func(t ticketView) string { return strconv.Itoa(t.Process.PID) }},
	{"devices", func(t ticketView) string {
		switch {
		case len(t.Devices) > 0:
			return indices(t.Devices)
		case t.Count > 1:
			return strconv.Itoa(t.Count) + " wanted"
		}
		return "-"
	}},
	{"time", func(t ticketView) string { return msAge(t.UsedMS) }},
	{"left", func(t ticketView) string {
		if t.State != "holding" {
			return "-"
		}
		if t.MaxHold == "" {
			return "none"
		}
		return msAge(t.LeftMS)
	}},
	{"wait", func(t ticketView) string { return age(time.Duration(t.WaitMS) * time.Millisecond) }},
	{"hold_id", func(t ticketView) string { return cell(t.HoldID, 40) }},
	{"command", func(t ticketView) string { return command(t.Cmd) }},
}

const defaultColumns = "resource,pos,ticket,state,label,user,host,pid,devices,time,left,wait,hold_id,command"

// pickColumns reads -o: column names separated by commas.
func pickColumns(spec string) ([]column, error) {
	var names []string
	for _, c := range columns {
		names = append(names, c.name)
	}
	var out []column
	for _, want := range strings.Split(spec, ",") {
		want = strings.ToLower(strings.TrimSpace(want))
		i := indexOf(names, want)
		if i < 0 {
			return nil, fmt.Errorf("-o: no column %q%s; the columns are %s", want, didYouMean(want, names), strings.Join(names, ","))
		}
		out = append(out, columns[i])
	}
	return out, nil
}

func indexOf(xs []string, x string) int {
	for i, s := range xs {
		if s == x {
			return i
		}
	}
	return -1
}

// msAge is age of a millisecond count, "-" when there is none.
func msAge(ms *int64) string {
	if ms == nil {
		return "-"
	}
	return age(time.Duration(*ms) * time.Millisecond)
}
