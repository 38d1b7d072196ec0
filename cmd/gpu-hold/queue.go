// queue.go owns `gpu-hold queue`: who holds each resource's token and who
// waits, as a table like squeue's (columns in queueview.go) or as JSON.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpu-hold/gpu-hold/internal/fleetenv"
	"github.com/gpu-hold/gpu-hold/internal/termsafe"
	"github.com/gpu-hold/gpu-hold/queue"
)

type queueOptions struct {
	g        *globalOpts
	JSON     bool
	Me       bool   // only the caller's tickets
	NoHeader bool   // no header line
	Columns  string // -o: the columns, by name
	// One is set when -r was given: that resource alone; otherwise every
	// resource of the queue dir.
	One bool
	UID int
	Out io.Writer
	Now func() time.Time
}

func newCmdQueue(g *globalOpts) *cobra.Command {
	opts := &queueOptions{g: g, Now: time.Now}
	cmd := &cobra.Command{
		Use:   "queue [-r RES] [--me] [--json] [--noheader] [-o COLUMNS]",
		Short: "Show who holds each resource's token and who waits for it",
		Long: `List, like squeue, the holds of every resource of the queue directory (or of -r RES alone):
the holder of each token, the holders that died without releasing (not yet reaped), and the
waiting tickets in order. Columns:

  RESOURCE POS TICKET STATE LABEL USER HOST PID   where it is, whose it is
  DEVICES   of a pool hold: the devices it holds, or how many it wants
  TIME      how long the holder has held the token
  LEFT      until its --max-hold runs out (none: no limit)
  WAIT      how long a ticket has waited (a holder: how long it waited)
  HOLD_ID   the hold's id (gpu-hold show, wait, cancel take it)
  COMMAND

A process that holds the token's lock, or the resource directory's, where no gpu-hold holder
explains it (no ticket, or a granted ticket whose process is not a gpu-hold) is named below the
table by pid, user, command and start time: every hold waits for it (one that holds the
ticket counter, seq, keeps every hold from queueing). A holder whose payload
ended but that keeps the token (--device-holders=wait|fail) while a process outside its
lineage holds the device says so below the table: the node, and that process's pid, user
and command (--json: the holder's "keeping").

-o picks and orders the columns by name (-o ticket,user,left). -r of a pool resource lists
its devices, each with its holder, then the pool's tickets. A ticket number, hold id,
label or user is what gpu-hold cancel takes. It creates nothing: an unknown -r is an error
(exit 125) that lists the known resources.`,
		Example: `  gpu-hold queue
  gpu-hold queue --me -o resource,ticket,state,time,left
  gpu-hold queue -r npu --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Out, opts.UID = cmd.OutOrStdout(), os.Getuid()
			opts.One = cmd.Flags().Changed("resource")
			return queueRun(opts)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&opts.JSON, "json", false, "print the queues as JSON")
	f.BoolVar(&opts.Me, "me", false, "only my tickets")
	f.BoolVar(&opts.NoHeader, "noheader", false, "no header line")
	f.StringVarP(&opts.Columns, "format", "o", defaultColumns, "the columns to show, by name, separated by commas")
	return cmd
}

// openQueue opens the resource's queue for a command that queues (it
// creates the resource dir when missing).
func (g *globalOpts) openQueue() (queue.Queue, error) {
	if q, ok, err := g.openFleet(); ok {
		return q, err
	}
	dir, err := g.queueDir()
	if err != nil {
		return nil, err
	}
	q, err := queue.OpenDir(dir, g.Resource, queue.DirOptions{Warn: g.warn})
	if err != nil {
		return nil, usageErr("%w", err)
	}
	return q, nil
}

// openQueueRead opens the resource's queue for a command that only reads:
// it creates nothing, so a mistyped -r leaves no directory behind. A
// configured resource that has no directory yet (nobody queued for it) is
// a nil queue; an unknown one is a usage error that lists the known ones.
func (g *globalOpts) openQueueRead() (queue.Queue, error) {
	if q, ok, err := g.openFleet(); ok {
		return q, err
	}
	dir, err := g.findDir()
	if err != nil {
		return nil, err
	}
	q, err := queue.OpenDir(dir, g.Resource, queue.DirOptions{NoCreate: true, Warn: g.warn})
	if errors.Is(err, queue.ErrNoResource) {
		if err := fleetenv.KnownResource(dir, g.Resource); err != nil {
			return nil, usageErr("%w", err)
		}
		return nil, nil
	}
	if err != nil {
		return nil, usageErr("%w", err)
	}
	return q, nil
}

// findDir resolves --dir for a command that only reads: it creates nothing.
func (g *globalOpts) findDir() (string, error) {
	d, err := fleetenv.FindDir(g.Dir)
	if err != nil {
		return "", usageErr("%w", err)
	}
	return d, nil
}

// warn logs one of the queue's warnings.
func (g *globalOpts) warn(msg string) { g.Log.Warn().Msg(msg) }

func queueRun(opts *queueOptions) error {
	if opts.One { // a pool resource named by -r: its devices and pool tickets
		if done, err := poolQueue(opts); done {
			return err
		}
	}
	if opts.Columns == "" {
		opts.Columns = defaultColumns
	}
	cols, err := pickColumns(opts.Columns)
	if err != nil {
		return usageErr("%v", err)
	}
	views, err := opts.g.statuses(opts.One, opts.Now())
	if err != nil {
		return err
	}
	if opts.Me {
		for i := range views {
			views[i] = mine(views[i], opts.UID)
		}
	}
	if opts.JSON {
		return writeJSON(opts.Out, queueDoc{Resources: views})
	}
	printQueue(opts.Out, views, cols, opts.NoHeader)
	return nil
}

// statuses reads the queue of -r's resource (one), or of every resource
// of the queue dir, as views.
func (g *globalOpts) statuses(one bool, now time.Time) ([]resourceView, error) {
	views := []resourceView{}
	err := g.eachQueue(one, func(_ queue.Queue, st queue.Status) error {
		views = append(views, viewOf(st, now))
		return nil
	})
	return views, err
}

// eachQueue calls fn with the queue (nil: a configured resource nobody has
// queued for) and status of -r's resource (one), or of every resource of
// the queue dir.
func (g *globalOpts) eachQueue(one bool, fn func(q queue.Queue, st queue.Status) error) error {
	res := []string{g.Resource}
	if c, err := g.etcdFleet(); err != nil {
		return err
	} else if c != nil {
		one = true // the etcd queue is listed one resource at a time (-r)
	}
	if !one {
		dir, err := g.findDir()
		if err != nil {
			return err
		}
		if res, err = fleetenv.Resources(dir); err != nil {
			return usageErr("%w", err)
		}
	}
	for _, r := range res {
		sub := *g
		sub.Resource = r
		q, err := sub.openQueueRead()
		if err != nil {
			return err
		}
		st := queue.Status{Resource: r, Waiters: []queue.Ticket{}}
		if q != nil {
			if st, err = q.Status(); err != nil {
				return usageErr("%w", err)
			}
		}
		if err := fn(q, st); err != nil {
			return err
		}
	}
	return nil
}

// mine is v with only uid's tickets.
func mine(v resourceView, uid int) resourceView {
	keep := func(ts []ticketView) []ticketView {
		out := []ticketView{}
		for _, t := range ts {
			if t.UID == uid {
				out = append(out, t)
			}
		}
		return out
	}
	if v.Holding != nil && v.Holding.UID != uid {
		v.Holding = nil
	}
	v.Waiting, v.Dead, v.AlsoHolding = keep(v.Waiting), keep(v.Dead), keep(v.AlsoHolding)
	if len(v.AlsoHolding) == 0 {
		v.AlsoHolding = nil
	}
	if len(v.Dead) == 0 {
		v.Dead = nil
	}
	return v
}

// writeJSON writes v indented, with & < > as themselves.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func printQueue(out io.Writer, views []resourceView, cols []column, noHeader bool) {
	var rows []ticketView
	var names []string
	for _, v := range views {
		rows = append(rows, v.rows()...)
		names = append(names, v.Resource)
	}
	if len(rows) == 0 {
		printIdle(out, views)
	} else {
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		if !noHeader {
			var h []string
			for _, c := range cols {
				h = append(h, strings.ToUpper(c.name))
			}
			fmt.Fprintln(tw, strings.Join(h, "\t"))
		}
		for _, r := range rows {
			var cells []string
			for _, c := range cols {
				cells = append(cells, c.cell(r))
			}
			fmt.Fprintln(tw, strings.Join(cells, "\t"))
		}
		tw.Flush()
	}
	for _, v := range views {
		if len(v.Dead) > 0 {
			fmt.Fprintf(out, "%s: dead: the holder died without releasing; the next hold ends what it left running first (or run gpu-hold reap -r %s)\n", v.Resource, v.Resource)
		}
		if h := v.Holding; h != nil && h.Keeping != nil {
			fmt.Fprintf(out, "%s: ticket %d's payload ended, but %s (since %s): the token goes on once they let go, or when the hold is cancelled (gpu-hold cancel -r %s %d)\n",
				v.Resource, h.Ticket, h.Keeping.Line(), h.Keeping.Since.Format(time.TimeOnly), v.Resource, h.Ticket)
		}
		for _, l := range v.Lockers {
			fmt.Fprintf(out, "%s: %s\n", v.Resource, l.line())
		}
		if len(v.Skipped) > 0 {
			// Their names are whatever their planters chose.
			fmt.Fprintf(out, "%s: skipped %d file(s) that are not valid gpu-hold files: %s\n", v.Resource, len(v.Skipped), termsafe.Text(strings.Join(v.Skipped, ", ")))
		}
	}
}

// printIdle says, of resources where no ticket is listed, which tokens are
// free; one locked with no ticket is not (its locker's line says by whom).
func printIdle(out io.Writer, views []resourceView) {
	var free, locked []string
	for _, v := range views {
		if slices.ContainsFunc(v.Lockers, func(l lockerView) bool { return l.Lock != counterLock }) {
			locked = append(locked, v.Resource)
		} else {
			free = append(free, v.Resource)
		}
	}
	switch {
	case len(views) == 0:
		fmt.Fprintln(out, "no holds: every token is free, nobody waiting")
	case len(free) > 0:
		fmt.Fprintf(out, "%s: token free, nobody waiting\n", strings.Join(free, ", "))
	}
	if len(locked) > 0 {
		fmt.Fprintf(out, "%s: nobody waiting and no ticket holds the token, but it is locked:\n", strings.Join(locked, ", "))
	}
}

// lockerView is a process that holds a queue's own locks where no
// gpu-hold holder explains it, with its user's name.
type lockerView struct {
	queue.Locker
	User string `json:"user,omitempty"`
}

func lockersOf(ls []queue.Locker) []lockerView {
	var out []lockerView
	for _, l := range ls {
		v := lockerView{Locker: l}
		if l.UID >= 0 {
			v.User = userName(l.UID) // as a ticket's user is shown
		}
		out = append(out, v)
	}
	return out
}

// line says who holds which lock, what it is to the queue, and who can
// end the wait for it.
func (l lockerView) line() string {
	what := map[string]string{
		"directory":           "the queue's directory (which every gpu-hold holder locks with the token) is",
		"token and directory": "the token and the queue's directory are",
	}[l.Lock]
	if l.Lock == counterLock {
		return fmt.Sprintf("the ticket counter (seq) is locked by %s. %s. No hold can take a ticket (each gives up after 10 s) until it lets go: %s", l.Describe(), l.Why(), l.Remedy())
	}
	if what == "" {
		what = "the token is"
	}
	return fmt.Sprintf("%s locked by %s. %s. Every hold waits until it lets go: %s", what, l.Describe(), l.Why(), l.Remedy())
}

// counterLock is a locker's Lock when it holds the ticket counter's alone.
const counterLock = "ticket counter"

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

var userNames = map[int]string{}

// userName names uid, or prints the number when it has no name.
func userName(uid int) string {
	if n, ok := userNames[uid]; ok {
		return n
	}
	n := strconv.Itoa(uid)
	if u, err := user.LookupId(n); err == nil {
		n = u.Username
	}
	userNames[uid] = n
	return n
}

// age prints d briefly: 42s, 3m05s, 2h07m, 3d04h.
func age(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	s := int64(d / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	case s < 86400:
		return fmt.Sprintf("%dh%02dm", s/3600, s%3600/60)
	}
	return fmt.Sprintf("%dd%02dh", s/86400, s%86400/3600)
}

// command joins argv for one table cell.
func command(argv []string) string { return cell(strings.Join(argv, " "), 60) }

// cell makes s safe for one table cell: control characters (a label or
// command is anyone's text) become spaces, and it is shortened to n runes.
func cell(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return ' '
		}
		return r
	}, s)
	if r := []rune(s); len(r) > n {
		s = string(r[:n-1]) + "…"
	}
	return orDash(s)
}
