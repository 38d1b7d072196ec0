// reap.go owns `gpu-hold reap`: end the lineage of a resource's dead holder
// (one that died without releasing) now, without running anything.
package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpu-hold/gpu-hold/hold"
	"github.com/gpu-hold/gpu-hold/internal/fleetenv"
)

type reapOptions struct {
	g                   *globalOpts
	all                 bool
	grace, survivorWait time.Duration
	Out                 io.Writer
}

func newCmdReap(g *globalOpts) *cobra.Command {
	opts := &reapOptions{g: g}
	cmd := &cobra.Command{
		Use:   "reap [-r RES | --all] [--dir PATH]",
		Short: "End the lineage of a dead holder of the resource's token",
		Long: `If the holder of the resource's token died without releasing (SIGKILL, OOM, a host agent
restart), end every process its payload created, append the reaping to its record, and free the
token. The next hold does the same by itself; reap does it now. Nothing happens when the holder
is alive.

A reap acts with the dead holder's own authority: run by root for a user's holder, it signals
only what that user could have signalled. It is the path that ends a dead holder's lineage
which its successor (another user) may not end: that successor waits, holding the token,
and reap runs beside it. --all reaps every resource of the queue directory (the
gpu-hold-reap timer runs it as root). Run by root, reap also applies the records retention
the admin set in <dir>/settings.json to every user's records of those resources, and --all
makes, in a shared queue directory, the dirs of every declared resource (built in, in
resources.json, and its pool's devices) that lacks one: a user's hold may not make one.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Out = cmd.OutOrStdout()
			return reapRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.all, "all", false, "reap the dead holders of every resource in the queue directory")
	durationVarP(cmd.Flags(), &opts.grace, "grace", "g", 10*time.Second, "time between TERM and KILL")
	durationVarP(cmd.Flags(), &opts.survivorWait, "survivor-wait", "", 30*time.Second, "how long to wait for processes that do not die on KILL")
	return cmd
}

func reapRun(ctx context.Context, opts *reapOptions) error {
	// As the hold command refuses them (hold.Options.Validate): a negative
	// grace would KILL at once, which is not what the user asked for.
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"--grace", opts.grace}, {"--survivor-wait", opts.survivorWait}} {
		if d.v < 0 {
			return usageErr("%s must not be negative (got %v): use 0 for none", d.name, d.v)
		}
	}
	dir, err := opts.g.queueDir()
	if err != nil {
		return err
	}
	fq, err := opts.g.etcdFleet()
	if err != nil {
		return err
	}
	n, err := hold.Reap(ctx, hold.ReapOptions{Dir: dir, Resource: opts.g.Resource, All: opts.all, Grace: opts.grace, SurvivorWait: opts.survivorWait, Log: opts.g.Log, Etcd: fq})
	if err != nil {
		return usageErr("%w", err)
	}
	res := []string{opts.g.Resource}
	if opts.all {
		res, _ = fleetenv.Resources(dir)
	}
	hold.PruneFleet(dir, res, opts.g.Log)
	what := opts.g.Resource
	if opts.all {
		what = dir
	}
	if n == 0 {
		fmt.Fprintf(opts.Out, "%s: no dead holder to reap (the token is free or its holder alive)\n", what)
	} else {
		fmt.Fprintf(opts.Out, "%s: reaped %d dead holder(s)\n", what, n)
	}
	return nil
}
