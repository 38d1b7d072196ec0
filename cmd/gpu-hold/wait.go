// wait.go owns `gpu-hold wait HOLD-ID`: wait for a hold (waiting or
// holding) to end, and exit with its exit code, as its record gives it.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpu-hold/gpu-hold/internal/fleetenv"
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
		return exitOf(append(recordCandidates(path, opts.HoldID), t.Record), opts.HoldID, t.UID)
	}
	// Ended already: its record, in any resource's records directory.
	res := []string{opts.g.Resource}
	if !opts.One {
		if res, err = fleetenv.Resources(dir); err != nil {
			return usageErr("%w", err)
		}
	}
	for _, r := range res {
		p := record.RecordPath(filepath.Join(dir, r), opts.HoldID)
		if c := recordCandidates(p, opts.HoldID); len(c) > 1 || exists(p) {
			return exitOf(c, opts.HoldID, -1)
		}
	}
	return usageErr("no hold %s is queued, holding, or on record: see gpu-hold queue and gpu-hold history (or give the right -r/--dir)", opts.HoldID)
}

// find is the hold's ticket, if it is in a queue. Tickets of several
// users that carry the same hold id are refused: any user may write any
// hold id in a ticket of their own, and the one waited for, whose record
// gives the exit code, would be a guess.
func (opts *waitOptions) find() (queue.Ticket, bool, error) {
	var t queue.Ticket
	found := false
	uids := map[int]bool{}
	err := opts.g.eachQueue(opts.One, func(_ queue.Queue, st queue.Status) error {
		for _, c := range tickets(st) {
			if c.HoldID == opts.HoldID && c.state != "dead" {
				uids[c.UID] = true
				if !found {
					t, found = c.Ticket, true
				}
			}
		}
		return nil
	})
	if err == nil && len(uids) > 1 {
		return t, false, usageErr("tickets of %d users carry hold id %s: one of them forged it, so which hold to wait for is not known; see gpu-hold queue, and ask an admin to cancel the forged one", len(uids), opts.HoldID)
	}
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
// directory's, else the path its ticket named. Only the holder's own file
// counts: uid, the holder's from its ticket, else (-1: the hold has left
// the queue) the uid the record names, which must own it and whose id
// must be id. Any member of the queue's group may create a file under
// another hold's name, and its exit code must not be the one returned.
func exitOf(paths []string, id string, uid int) error {
	var rec *record.Record
	err := errors.New("no record found")
	for i, p := range paths {
		if p == "" || i > 0 && p == paths[0] {
			continue
		}
		r, rerr := record.ReadRecord(p)
		if rerr == nil {
			rerr = holdersRecord(r, id, uid)
		}
		if rerr == nil {
			rec, err = r, nil
			break
		}
		if i == 0 {
			err = rerr // the usual name's reason is the one to tell
		}
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

// holdersRecord says why rec is not hold id's record written by its holder
// uid (-1: the uid rec names), or nil. Whose file it is comes from its
// owner, never from what it says.
func holdersRecord(rec *record.Record, id string, uid int) error {
	owner := int(rec.File.UID)
	if uid < 0 {
		uid = rec.Hold.UID
	}
	switch {
	case owner != uid:
		return fmt.Errorf("%s is uid %d's file, not the holder's (uid %d): another user planted or rewrote it, so its exit code is not believed (gpu-hold show %s says what it claims)", rec.Path, owner, uid, rec.Path)
	case rec.Hold.ID != id:
		return fmt.Errorf("%s is the record of hold %s, not of %s: its exit code is not this hold's", rec.Path, rec.Hold.ID, id)
	}
	return nil
}

// freshTries bounds the fresh-named records of one hold id read.
const freshTries = 8

// recordCandidates is path, the usual name of hold id's record, then the
// names a hold gives its record when it finds the usual one taken
// (record.FreshRecordName): anyone may make a file at the usual name, so
// the holder's own record may be under a fresh one beside it.
func recordCandidates(path, id string) []string {
	return append([]string{path}, record.FreshRecordPaths(path, id, -1, freshTries)...)
}

func exists(path string) bool { _, err := os.Lstat(path); return err == nil }
