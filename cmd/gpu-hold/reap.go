// reap.go owns `gpu-hold reap`: end the lineage of a resource's dead holder
// (one that died without releasing) now, without running anything.
package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpu-hold/gpu-hold/hold"
)

type reapOptions struct {
	g                   *globalOpts
	grace, survivorWait time.Duration
}

func newCmdReap(g *globalOpts) *cobra.Command {
	opts := &reapOptions{g: g}
	cmd := &cobra.Command{
		Use:   "reap [-r RES] [--dir PATH]",
		Short: "End the lineage of a dead holder of the resource's token",
		Long: `If the holder of the resource's token died without releasing (SIGKILL, OOM, a host agent
restart), end every process its payload created, append the reaping to its record, and free the
token. The next hold does the same by itself; reap does it now. Nothing happens when the holder
is alive.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return reapRun(cmd, opts) },
	}
	durationVarP(cmd.Flags(), &opts.grace, "grace", "g", 10*time.Second, "time between TERM and KILL")
	durationVarP(cmd.Flags(), &opts.survivorWait, "survivor-wait", "", 30*time.Second, "how long to wait for processes that do not die on KILL")
	return cmd
}

func reapRun(cmd *cobra.Command, opts *reapOptions) error {
	dir, err := opts.g.queueDir()
	if err != nil {
		return err
	}
	n, err := hold.Reap(cmd.Context(), hold.ReapOptions{Dir: dir, Resource: opts.g.Resource, Grace: opts.grace, SurvivorWait: opts.survivorWait, Log: opts.g.Log})
	if err != nil {
		return &exitError{code: hold.ExitUsage, err: err}
	}
	if n == 0 {
		fmt.Fprintf(cmd.OutOrStdout(), "%s: no dead holder to reap\n", opts.g.Resource)
	} else {
		fmt.Fprintf(cmd.OutOrStdout(), "%s: reaped %d dead holder(s)\n", opts.g.Resource, n)
	}
	return nil
}
