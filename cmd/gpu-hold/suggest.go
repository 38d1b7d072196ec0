// suggest.go owns "did you mean" on the command line: flags whose value is
// one of a known set (choiceValue), and mistyped subcommands (the nearest
// word itself is internal/suggest's).
package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpu-hold/gpu-hold/internal/suggest"
)

// choiceValue is a string flag whose value must be one of known.
type choiceValue struct {
	p     *string
	known []string
}

// choiceVar defines a flag that takes one of known (the first is the default).
func choiceVar(f *pflag.FlagSet, p *string, name, usage string, known ...string) {
	*p = known[0]
	f.Var(&choiceValue{p: p, known: known}, name, usage)
}

func (c *choiceValue) Set(s string) error {
	for _, k := range c.known {
		if s == k {
			*c.p = s
			return nil
		}
	}
	return fmt.Errorf("not one of %s%s", strings.Join(c.known, ", "), didYouMean(s, c.known))
}

func (c *choiceValue) String() string { return *c.p }
func (c *choiceValue) Type() string   { return strings.Join(c.known, "|") }

// didYouMean is ": did you mean X?" for the known word nearest to s, or ""
// when none is near.
func didYouMean(s string, known []string) string { return suggest.DidYouMean(s, known) }

// trackValues are --track's values; trackValue reports whether the
// argument after a bare --track is meant as its value (or a typo of one).
var trackValues = []string{"auto", "bpf", "proc"}

func trackValue(a string) bool {
	return !strings.HasPrefix(a, "-") && suggest.Nearest(a, trackValues) != ""
}

// suggestCommands makes the root command answer a mistyped subcommand
// (gpu-hold queu) with "did you mean", before it would read it as a
// payload given without --.
func suggestCommands(root *cobra.Command) {
	run := root.RunE
	root.RunE = func(cmd *cobra.Command, args []string) error {
		if cmd.ArgsLenAtDash() < 0 && len(args) > 0 {
			var names []string
			for _, c := range cmd.Commands() {
				if c.IsAvailableCommand() {
					names = append(names, c.Name())
				}
			}
			if s := didYouMean(args[0], names); s != "" {
				return usageErr("unknown command %q%s (a command to run goes after --: gpu-hold [flags] -- %s ...)", args[0], s, args[0])
			}
		}
		return run(cmd, args)
	}
}
