// wait.go owns `gpu-hold wait HOLD-ID`: wait for a hold (waiting or
// holding) to end, and exit with its exit code, as its record gives it.
package main

import (
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpu-hold/gpu-hold/hold"
	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/record"
	"github.com/gpu-hold/gpu-hold/queue"
)

type waitOptions struct {
	g       *globalOpts
	HoldID  string
	Timeout time.Duration
	One     bool
	Out     io.Writer
}

func newCmdWait(g *globalOpts) *cobra.Command {
	opts := &waitOptions{g: g}
	cmd := &cobra.Command{
		Use:   "wait HOLD-ID [-r RES] [--timeout D]",
		Short: "Wait for a hold to end and exit with its exit code",
		Long: `Wait until hold HOLD-ID (as gpu-hold queue shows it), waiting or holding, has ended, then
exit with the exit code its record gives (0, the payload's code, 124 for the max hold, 77
when cancelled...). A hold that has already ended exits at once with its code. The wait is
on the hold's gpu-hold process by its identity (a pidfd), not a poll. Exit 125 when there is
no such hold, when its gpu-hold died before writing its end (see gpu-hold show), or when
--timeout ran out.`,
		Example: `  id=$(gpu-hold queue --me --noheader -o hold_id | head -1)
  gpu-hold wait "$id"; echo "the hold exited $?"`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErr("wait takes one hold id, e.g. gpu-hold wait 20261201T223356-1f2e3d4c (see gpu-hold queue)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.HoldID, opts.Out = args[0], cmd.OutOrStdout()
			opts.One = cmd.Flags().Changed("resource")
			return waitRun(opts)
		},
	}
	durationVarP(cmd.Flags(), &opts.Timeout, "timeout", "", 0, "give up (exit 125) after this long (0: wait for ever)")
	return cmd
}

func waitRun(opts *waitOptions) error {
	if !holdIDForm.MatchString(opts.HoldID) {
		return usageErr("%q is not a hold id (like 20261201T223356-1f2e3d4c): see gpu-hold queue or gpu-hold history", opts.HoldID)
	}
	t, found, err := opts.find()
	if err != nil {
		return err
	}
	dir, err := opts.g.findDir()
	if err != nil {
		return err
	}
	if found {
		if err := awaitHolder(t, opts.Timeout); err != nil {
			return err
		}
		path := record.RecordPath(filepath.Join(dir, t.Resource), opts.HoldID)
		if t.Granted.IsZero() && !exists(path) && (t.Record == "" || !exists(t.Record)) {
			return usageErr("hold %s ended before it took the token (cancelled, its -w ran out, or signalled while waiting): it has no record, so its exit code is not known", opts.HoldID)
		}
		return exitOf(path, t.Record, opts.HoldID)
	}
	// Ended already: its record, in any resource's records directory.
	res := []string{opts.g.Resource}
	if !opts.One {
		if res, err = hold.Resources(dir); err != nil {
			return usageErr("%w", err)
		}
	}
	for _, r := range res {
		p := record.RecordPath(filepath.Join(dir, r), opts.HoldID)
		if _, err := os.Lstat(p); err == nil {
			return exitOf(p, "", opts.HoldID)
		}
	}
	return usageErr("no hold %s is queued, holding, or on record: see gpu-hold queue and gpu-hold history (or give the right -r/--dir)", opts.HoldID)
}

// find is the hold's ticket, if it is in a queue.
func (opts *waitOptions) find() (queue.Ticket, bool, error) {
	var t queue.Ticket
	found := false
	err := opts.g.eachQueue(opts.One, func(_ queue.Queue, st queue.Status) error {
		for _, c := range tickets(st) {
			if c.HoldID == opts.HoldID && c.state != "dead" && !found {
				t, found = c.Ticket, true
			}
		}
		return nil
	})
	return t, found, err
}

// awaitHolder waits for the ticket's gpu-hold to exit, through a pidfd
// opened after its start time was checked.
func awaitHolder(t queue.Ticket, timeout time.Duration) error {
	h, err := proc.Open(t.Holder)
	if err != nil {
		return nil // gone already
	}
	defer h.Close()
	if timeout <= 0 {
		timeout = time.Duration(1<<63 - 1)
	}
	if !h.WaitExit(timeout) {
		return usageErr("hold %s (%s) had not ended after %v", t.HoldID, t.Describe(), queue.Round(timeout))
	}
	return nil
}

// exitOf exits with the code the hold's record gives: the records
// directory's, else the path its ticket named.
func exitOf(path, alt, id string) error {
	rec, err := record.ReadRecord(path)
	if err != nil && alt != "" {
		rec, err = record.ReadRecord(alt)
	}
	if err != nil {
		return usageErr("hold %s ended, but its record cannot be read: %v", id, err)
	}
	if rec.Hold.ExitCode == nil {
		return usageErr("hold %s's gpu-hold ended without writing its exit code (it was killed): see gpu-hold show %s", id, rec.Path)
	}
	if c := *rec.Hold.ExitCode; c != 0 {
		return &exitError{code: c}
	}
	return nil
}

func exists(path string) bool { _, err := os.Lstat(path); return err == nil }
