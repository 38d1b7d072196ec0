// cancel.go owns `gpu-hold cancel TICKET`: remove a waiting ticket (its
// owner or root only); the hold that owned it exits 75. It creates nothing
// in the queue dir.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpu-hold/gpu-hold/queue"
)

type cancelOptions struct {
	g      *globalOpts
	Ticket string
	UID    int
	Out    io.Writer
}

func newCmdCancel(g *globalOpts) *cobra.Command {
	opts := &cancelOptions{g: g}
	cmd := &cobra.Command{
		Use:   "cancel TICKET",
		Short: "Remove a waiting ticket from the resource's queue",
		Long: `Remove waiting ticket TICKET (its number, as gpu-hold queue shows it) from the resource's
queue. The gpu-hold waiting on it notices at once and exits 75 without running its command.
Only the ticket's owner or root may cancel it. A ticket that holds the token is not cancelled:
end that hold by sending its gpu-hold process SIGTERM.`,
		Example: `  gpu-hold queue -r gpu
  gpu-hold cancel -r gpu 42`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErr("cancel takes one ticket number, e.g. gpu-hold cancel 42 (see gpu-hold queue for the numbers)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Ticket, opts.UID, opts.Out = args[0], os.Getuid(), cmd.OutOrStdout()
			return cancelRun(opts)
		},
	}
	return cmd
}

func cancelRun(opts *cancelOptions) error {
	res := opts.g.Resource
	seq, err := strconv.ParseUint(strings.TrimPrefix(opts.Ticket, "t."), 10, 64)
	if err != nil {
		return usageErr("%q is not a ticket number: give the number gpu-hold queue -r %s shows, e.g. gpu-hold cancel 42", opts.Ticket, res)
	}
	q, err := opts.g.openQueueRead()
	if err != nil {
		return err
	}
	if q == nil {
		return usageErr("no ticket %d is waiting for %s: nobody has queued for it (see gpu-hold queue -r %s, or give the right -r/--dir)", seq, res, res)
	}
	// For the message: what is being cancelled.
	desc := fmt.Sprintf("ticket %d", seq)
	if st, err := q.Status(); err == nil {
		for _, w := range st.Waiters {
			if w.Seq == seq {
				desc = w.Describe()
			}
		}
	}
	if err := q.Cancel(seq, opts.UID); err != nil {
		switch {
		case errors.Is(err, queue.ErrNoTicket):
			err = fmt.Errorf("no ticket %d is waiting for %s: see gpu-hold queue -r %s (or give the right -r/--dir)", seq, res, res)
		}
		return usageErr("%w", err)
	}
	fmt.Fprintf(opts.Out, "cancelled %s from the %s queue\n", desc, res)
	return nil
}
