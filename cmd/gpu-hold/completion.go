// completion.go owns dynamic shell completion (cobra's completion command,
// for bash, zsh and fish): resources for -r, ticket numbers and hold ids
// for cancel, hold ids for wait, the records' hold ids for show, and the
// known values of every flag that takes one of a set.
package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpu-hold/gpu-hold/internal/fleetenv"
	"github.com/gpu-hold/gpu-hold/internal/record"
	"github.com/gpu-hold/gpu-hold/queue"
)

// setupCompletion registers the completions on root and its subcommands.
func setupCompletion(root *cobra.Command, g *globalOpts) {
	root.RegisterFlagCompletionFunc("resource", func(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
		return g.completeResources(), cobra.ShellCompDirectiveNoFileComp
	})
	for _, c := range append(root.Commands(), root) {
		c.Flags().VisitAll(func(f *pflag.Flag) { completeChoices(c, f) })
		switch c.Name() {
		case "cancel":
			c.ValidArgsFunction = g.completeTickets(true)
		case "wait":
			c.ValidArgsFunction = g.completeTickets(false)
		case "show":
			c.ValidArgsFunction = g.completeRecords
		}
	}
	root.PersistentFlags().VisitAll(func(f *pflag.Flag) { completeChoices(root, f) })
}

// completeChoices completes a choiceValue flag with its known values.
func completeChoices(c *cobra.Command, f *pflag.Flag) {
	if cv, ok := f.Value.(*choiceValue); ok {
		known := cv.known
		c.RegisterFlagCompletionFunc(f.Name, func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return known, cobra.ShellCompDirectiveNoFileComp
		})
	}
}

// completeResources lists the queue dir's resources, and the configured
// ones (gpu, npu...), without creating anything.
func (g *globalOpts) completeResources() []string {
	seen := map[string]bool{}
	var out []string
	if dir, err := fleetenv.FindDir(g.Dir); err == nil {
		rs, _ := fleetenv.Resources(dir)
		for _, r := range rs {
			seen[r] = true
			out = append(out, r)
		}
	}
	for _, r := range []string{"gpu", "npu"} {
		if !seen[r] {
			out = append(out, r)
		}
	}
	return out
}

// completeTickets completes hold ids (with their label and state as the
// description) and, with numbers, the ticket numbers of -r's resource.
func (g *globalOpts) completeTickets(numbers bool) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []string
		quiet := *g
		quiet.Log = zerolog.Nop() // completion must print nothing else
		one := cmd.Flags().Changed("resource")
		quiet.eachQueue(one, func(_ queue.Queue, st queue.Status) error {
			v := viewOf(st, time.Now())
			for _, t := range v.rows() {
				desc := t.Resource + " " + t.State + " " + orDash(t.Label) + " (" + t.User + ")"
				if t.HoldID != "" {
					out = append(out, t.HoldID+"\t"+desc)
				}
				if numbers && (one || t.Resource == g.Resource) {
					out = append(out, strconv.FormatUint(t.Ticket, 10)+"\t"+desc)
				}
			}
			return nil
		})
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeRecords completes show's RECORD with the hold ids of -r's
// records directory, newest first, and files.
func (g *globalOpts) completeRecords(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	dir, err := fleetenv.FindDir(g.Dir)
	if err != nil {
		return nil, cobra.ShellCompDirectiveDefault
	}
	ents, _ := os.ReadDir(filepath.Dir(record.RecordPath(filepath.Join(dir, g.Resource), "x")))
	var out []string
	for i := len(ents) - 1; i >= 0; i-- {
		if id, ok := strings.CutSuffix(ents[i].Name(), ".jsonl"); ok && ents[i].Type().IsRegular() {
			out = append(out, id)
		}
	}
	return out, cobra.ShellCompDirectiveDefault
}
