// history.go owns `gpu-hold history`: past holds, from the records in each
// resource's records directory (newest first): when, whose, label, cause,
// exit code, duration and lineage size.
package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpu-hold/gpu-hold/internal/fleetenv"
	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/record"
)

type historyOptions struct {
	g     *globalOpts
	N     int  // most recent holds shown (0: all)
	Me    bool // only the caller's
	JSON  bool
	One   bool // -r given
	UID   int
	Out   io.Writer
	Warn  io.Writer
	Label string
}

func newCmdHistory(g *globalOpts) *cobra.Command {
	opts := &historyOptions{g: g}
	cmd := &cobra.Command{
		Use:   "history [-r RES] [-n N] [--me] [--label L] [--json]",
		Short: "List past holds from their records",
		Long: `List the holds whose records are in the records directories of every resource (or of -r
RES alone), newest first: when the token was taken, the resource, the user (the record
file's owner), label, why the hold ended (its cause), gpu-hold's exit code, how long the
payload ran until the token was released, the number of processes its lineage had, and
the hold id (gpu-hold show -r RES HOLD-ID shows the lineage). A hold still running is
"running"; one whose gpu-hold died before its end line is "died". Records kept are bounded
by each user's --keep-records and --record-age and by the admin's <dir>/settings.json;
records written elsewhere (--dump) are not listed.`,
		Example: `  gpu-hold history
  gpu-hold history --me -n 5
  gpu-hold history -r gpu --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Out, opts.Warn, opts.UID = cmd.OutOrStdout(), cmd.ErrOrStderr(), os.Getuid()
			opts.One = cmd.Flags().Changed("resource")
			return historyRun(opts)
		},
	}
	f := cmd.Flags()
	f.IntVarP(&opts.N, "count", "n", 20, "show the N most recent holds (0: all)")
	f.BoolVar(&opts.Me, "me", false, "only my holds")
	f.StringVar(&opts.Label, "label", "", "only holds with this label")
	f.BoolVar(&opts.JSON, "json", false, "print the list as JSON")
	return cmd
}

// pastHold is one line of the history.
type pastHold struct {
	Time       time.Time `json:"time"`
	Resource   string    `json:"resource"`
	User       string    `json:"user"`
	UID        int       `json:"uid"`
	Label      string    `json:"label,omitempty"`
	State      string    `json:"state"` // ended, running, died
	Cause      string    `json:"cause,omitempty"`
	ExitCode   *int      `json:"exit_code,omitempty"`
	DurationMS int64     `json:"duration_ms"`
	Processes  int       `json:"processes"`
	HoldID     string    `json:"hold_id"`
	Record     string    `json:"record"`
}

func historyRun(opts *historyOptions) error {
	if opts.N < 0 {
		return usageErr("-n must not be negative (got %d): use 0 for all", opts.N)
	}
	dir, err := opts.g.findDir()
	if err != nil {
		return err
	}
	res := []string{opts.g.Resource}
	if !opts.One {
		if res, err = fleetenv.Resources(dir); err != nil {
			return usageErr("%w", err)
		}
	} else if err := fleetenv.KnownResource(dir, opts.g.Resource); err != nil {
		return usageErr("%w", err)
	}
	var holds []pastHold
	for _, r := range res {
		holds = append(holds, opts.readResource(filepath.Join(dir, r), r)...)
	}
	sort.SliceStable(holds, func(i, j int) bool { return holds[i].Time.After(holds[j].Time) })
	if opts.N > 0 && len(holds) > opts.N {
		holds = holds[:opts.N]
	}
	if opts.JSON {
		if holds == nil {
			holds = []pastHold{}
		}
		return writeJSON(opts.Out, holds)
	}
	printHistory(opts.Out, holds)
	return nil
}

// readResource reads the records of one resource; one that cannot be read
// is reported and skipped.
func (opts *historyOptions) readResource(resDir, res string) []pastHold {
	recDir := filepath.Dir(record.RecordPath(resDir, "x"))
	ents, err := os.ReadDir(recDir)
	if err != nil {
		return nil
	}
	var out []pastHold
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".jsonl") || !e.Type().IsRegular() {
			continue
		}
		path := filepath.Join(recDir, e.Name())
		rec, err := record.ReadRecord(path)
		if err != nil {
			fmt.Fprintf(opts.Warn, "gpu-hold: skipping record %s: %v\n", path, err)
			continue
		}
		p := pastOf(rec, res)
		if (opts.Me && p.UID != opts.UID) || (opts.Label != "" && p.Label != opts.Label) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// pastOf is a record as a line. Whose it is comes from the file's owner.
func pastOf(rec *record.Record, res string) pastHold {
	h := rec.Hold
	uid := int(rec.File.UID)
	p := pastHold{Resource: res, UID: uid, User: userName(uid), Label: h.Label, Cause: string(h.Cause), ExitCode: h.ExitCode,
		Processes: len(rec.Processes), HoldID: h.ID, Record: rec.Path, Time: h.Times.Granted}
	if p.Time.IsZero() {
		p.Time = h.Times.Queued
	}
	switch {
	case rec.Ended:
		p.State = "ended"
	case proc.Alive(h.Holder):
		p.State = "running"
	default:
		p.State = "died"
	}
	start, end := h.Times.PayloadStart, h.Times.Released
	if end.IsZero() {
		end = h.Times.TeardownEnd
	}
	if end.IsZero() && p.State == "running" {
		end = time.Now()
	}
	if end.IsZero() {
		end = rec.Last
	}
	if !start.IsZero() && end.After(start) {
		p.DurationMS = end.Sub(start).Milliseconds()
	}
	return p
}

func printHistory(out io.Writer, holds []pastHold) {
	if len(holds) == 0 {
		fmt.Fprintln(out, "no past holds on record")
		return
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tRESOURCE\tUSER\tLABEL\tCAUSE\tEXIT\tDURATION\tPROCS\tHOLD_ID")
	for _, p := range holds {
		cause, exit := orDash(p.Cause), "-"
		if p.State != "ended" {
			cause = p.State
		}
		if p.ExitCode != nil {
			exit = strconv.Itoa(*p.ExitCode)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", p.Time.Local().Format("2006-01-02 15:04:05"), cell(p.Resource, 16), cell(p.User, 16),
			cell(p.Label, 24), cell(cause, 16), exit, age(time.Duration(p.DurationMS)*time.Millisecond), p.Processes, cell(p.HoldID, 40))
	}
	tw.Flush()
}
