// queue.go owns `gpu-hold queue`: who holds a resource's token and who
// waits (position, ticket, label, pid, user, age, command), as a table or,
// with --json, as queue.Status.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/user"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpu-hold/gpu-hold/hold"
	"github.com/gpu-hold/gpu-hold/queue"
)

type queueOptions struct {
	g    *globalOpts
	JSON bool
	Out  io.Writer
	Now  func() time.Time
}

func newCmdQueue(g *globalOpts) *cobra.Command {
	opts := &queueOptions{g: g, Now: time.Now}
	cmd := &cobra.Command{
		Use:   "queue [-r RES] [--dir PATH] [--json]",
		Short: "Show who holds the resource's token and who waits for it",
		Long: `List the holder of the resource's token and the waiting tickets in order, with their
position, ticket number, label, pid, user, age and command. Holders that died without releasing
(not yet reaped) are listed too. A ticket number is what gpu-hold cancel takes. It creates
nothing: a resource that is neither configured nor has a directory is an error (exit 125) that
lists the known ones.`,
		Example: `  gpu-hold queue
  gpu-hold queue -r npu --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Out = cmd.OutOrStdout()
			return queueRun(opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the queue as JSON")
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
		if err := hold.KnownResource(dir, g.Resource); err != nil {
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
	d, err := hold.FindDir(g.Dir)
	if err != nil {
		return "", usageErr("%w", err)
	}
	return d, nil
}

// warn logs one of the queue's warnings.
func (g *globalOpts) warn(msg string) { g.Log.Warn().Msg(msg) }

func queueRun(opts *queueOptions) error {
	if done, err := poolQueue(opts); done {
		return err
	}
	q, err := opts.g.openQueueRead()
	if err != nil {
		return err
	}
	st := queue.Status{Resource: opts.g.Resource, Waiters: []queue.Ticket{}}
	if q != nil {
		if st, err = q.Status(); err != nil {
			return usageErr("%w", err)
		}
	}
	if opts.JSON {
		enc := json.NewEncoder(opts.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(st)
	}
	printQueue(opts.Out, st, opts.Now())
	return nil
}

func printQueue(out io.Writer, st queue.Status, now time.Time) {
	if st.Holder == nil && len(st.Waiters) == 0 && len(st.Dead) == 0 {
		fmt.Fprintf(out, "%s: token free, nobody waiting\n", st.Resource)
		return
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POS\tTICKET\tSTATE\tLABEL\tPID\tHOST\tUSER\tAGE\tCOMMAND")
	row := func(pos, state string, t queue.Ticket, since time.Time) {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", pos, t.Seq, state, cell(t.Label, 24), t.Holder.PID,
			cell(t.Host, 24), userName(t.UID), age(now.Sub(since)), command(t.Cmd))
	}
	for _, d := range st.Dead {
		row("-", "dead", d, d.Granted)
	}
	if h := st.Holder; h != nil {
		row("0", "holding", *h, h.Granted)
	}
	for _, h := range st.Holders {
		row("0", "holding", h, h.Granted)
	}
	for i, w := range st.Waiters {
		row(strconv.Itoa(i+1), "waiting", w, w.Created)
	}
	tw.Flush()
	if len(st.Dead) > 0 {
		fmt.Fprintf(out, "dead: the holder died without releasing; the next hold ends what it left running first (or run gpu-hold reap -r %s)\n", st.Resource)
	}
	if len(st.Skipped) > 0 {
		fmt.Fprintf(out, "skipped %d file(s) that are not valid gpu-hold files: %s\n", len(st.Skipped), strings.Join(st.Skipped, ", "))
	}
}

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
