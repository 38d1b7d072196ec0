// cancel.go owns `gpu-hold cancel`: by ticket number, hold id, label or
// user, a waiting ticket leaves its queue (its gpu-hold exits 75) and a
// running hold is asked to end through its own teardown (exit 77, cause
// cancelled); its owner or root only. It creates nothing in the queue dir.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"regexp"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpu-hold/gpu-hold/hold"
	"github.com/gpu-hold/gpu-hold/queue"
)

type cancelOptions struct {
	g      *globalOpts
	Ticket string // a ticket number or a hold id (the argument)
	Label  string // --label
	User   string // --user: a name or a uid
	One    bool   // -r given: that resource alone (a ticket number always)
	UID    int
	Out    io.Writer
}

func newCmdCancel(g *globalOpts) *cobra.Command {
	opts := &cancelOptions{g: g}
	cmd := &cobra.Command{
		Use:   "cancel {TICKET | HOLD-ID | --label LABEL | --user USER} [-r RES]",
		Short: "Take waiting tickets out of the queue, or end running holds",
		Long: `Cancel the tickets named by a ticket number (of -r's resource, as gpu-hold queue shows it),
a hold id, a label or a user (of every resource, or of -r's alone):

  a waiting ticket leaves the queue: its gpu-hold notices at once and exits 75 without
  running its command;
  a running hold is asked to end (SIGUSR1 to its gpu-hold, sent after its identity was
  checked): it ends through its own teardown, TERM, grace and KILL, writes the cause
  "cancelled" in its record, releases the token and exits 77. gpu-hold wait HOLD-ID
  waits for it.

Only a ticket's owner or root may cancel it: root's signal carries the owner's authority,
so the kernel decides what it may reach.`,
		Example: `  gpu-hold queue
  gpu-hold cancel 42
  gpu-hold cancel 20261201T223356-1f2e3d4c
  gpu-hold cancel --label nightly-bench
  gpu-hold cancel --user alice -r gpu`,
		Args: func(cmd *cobra.Command, args []string) error {
			l, u := cmd.Flags().Changed("label"), cmd.Flags().Changed("user")
			n := len(args)
			for _, b := range []bool{l, u} {
				if b {
					n++
				}
			}
			if n != 1 {
				return usageErr("cancel takes one ticket number or hold id, or one of --label, --user, e.g. gpu-hold cancel 42 (see gpu-hold queue)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.Ticket = args[0]
			}
			opts.UID, opts.Out = os.Getuid(), cmd.OutOrStdout()
			opts.One = cmd.Flags().Changed("resource")
			return cancelRun(opts)
		},
	}
	cmd.Flags().StringVar(&opts.Label, "label", "", "cancel every ticket with this label")
	cmd.Flags().StringVar(&opts.User, "user", "", "cancel every ticket of this user (a name or a uid)")
	return cmd
}

// holdIDForm is what newHoldID makes.
var holdIDForm = regexp.MustCompile(`^[0-9]{8}T[0-9]{6}-[0-9a-f]{8}$`)

// selector says which tickets a cancel names.
type selector struct {
	seq    uint64 // a ticket number (of one resource)
	holdID string
	label  string
	uid    int // -1: any
	what   string
}

func (s selector) match(t queue.Ticket) bool {
	switch {
	case s.holdID != "":
		return t.HoldID == s.holdID
	case s.label != "":
		return t.Label == s.label
	case s.uid >= 0:
		return t.UID == s.uid
	}
	return t.Seq == s.seq
}

func (opts *cancelOptions) selector() (selector, error) {
	res := opts.g.Resource
	switch {
	case opts.Label != "":
		return selector{label: opts.Label, uid: -1, what: fmt.Sprintf("label %q", opts.Label)}, nil
	case opts.User != "":
		uid, err := lookupUser(opts.User)
		return selector{uid: uid, what: "user " + opts.User}, err
	case holdIDForm.MatchString(opts.Ticket):
		return selector{holdID: opts.Ticket, uid: -1, what: "hold " + opts.Ticket}, nil
	}
	seq, err := strconv.ParseUint(strings.TrimPrefix(opts.Ticket, "t."), 10, 64)
	if err != nil {
		return selector{}, usageErr("%q is not a ticket number or a hold id: give one gpu-hold queue -r %s shows, e.g. gpu-hold cancel 42", opts.Ticket, res)
	}
	opts.One = true // ticket numbers are per resource
	return selector{seq: seq, uid: -1, what: fmt.Sprintf("ticket %d", seq)}, nil
}

// lookupUser is a user name's uid, or a uid given as a number.
func lookupUser(s string) (int, error) {
	if u, err := user.Lookup(s); err == nil {
		return strconv.Atoi(u.Uid)
	}
	if n, err := strconv.Atoi(s); err == nil && n >= 0 {
		return n, nil
	}
	return 0, usageErr("--user %q is neither a user name nor a uid", s)
}

func cancelRun(opts *cancelOptions) error {
	sel, err := opts.selector()
	if err != nil {
		return err
	}
	found := 0
	var errs []error
	err = opts.g.eachQueue(opts.One, func(q queue.Queue, st queue.Status) error {
		for _, t := range tickets(st) {
			if sel.match(t.Ticket) {
				found++
				if err := opts.cancelOne(q, t); err != nil {
					errs = append(errs, err)
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if found == 0 {
		where := "any resource's queue"
		if opts.One {
			where = "the " + opts.g.Resource + " queue"
		}
		return usageErr("no %s is waiting for or holds a token in %s: see gpu-hold queue (or give the right -r/--dir)", sel.what, where)
	}
	if len(errs) > 0 {
		return usageErr("%w", errors.Join(errs...))
	}
	return nil
}

// stateTicket is a ticket with its state in the queue.
type stateTicket struct {
	queue.Ticket
	state string
}

func tickets(st queue.Status) []stateTicket {
	var out []stateTicket
	if st.Holder != nil {
		out = append(out, stateTicket{*st.Holder, "holding"})
	}
	for _, h := range st.Holders {
		out = append(out, stateTicket{h, "holding"})
	}
	for _, w := range st.Waiters {
		out = append(out, stateTicket{w, "waiting"})
	}
	for _, d := range st.Dead {
		out = append(out, stateTicket{d, "dead"})
	}
	return out
}

// cancelOne cancels one ticket by its state.
func (opts *cancelOptions) cancelOne(q queue.Queue, t stateTicket) error {
	res := t.Resource
	switch t.state {
	case "dead":
		return fmt.Errorf("%s of %s died holding the token; its processes may still run: run gpu-hold reap -r %s", t.Describe(), res, res)
	case "holding":
		if err := hold.CancelRunning(t.Ticket, opts.UID); err != nil {
			return err
		}
		fmt.Fprintf(opts.Out, "asked the running hold %s of %s to end: it ends through its teardown and exits %d (gpu-hold wait -r %s %s waits for it)\n",
			t.Describe(), res, hold.ExitCancelled, res, orDash(t.HoldID))
		return nil
	}
	if err := q.Cancel(t.Seq, opts.UID); err != nil {
		if errors.Is(err, queue.ErrNoTicket) {
			return fmt.Errorf("%s left the %s queue before it could be cancelled", t.Describe(), res)
		}
		return err
	}
	fmt.Fprintf(opts.Out, "cancelled waiting %s from the %s queue\n", t.Describe(), res)
	return nil
}
