// suggest.go owns "did you mean": flags whose value is one of a known set
// (choiceValue), and the nearest known word to a mistyped one, for flag
// values and subcommands alike.
package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
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
func didYouMean(s string, known []string) string {
	if k := nearest(s, known); k != "" {
		return fmt.Sprintf(": did you mean %q?", k)
	}
	return ""
}

// nearest is the known word within two edits of s (or that s starts or ends
// a longer word with), "" when there is none.
func nearest(s string, known []string) string {
	best, bestD := "", 3
	ls := strings.ToLower(s)
	for _, k := range known {
		d := editDistance(ls, strings.ToLower(k))
		if len(ls) >= 2 && d > 2 && (strings.HasPrefix(k, ls) || strings.HasSuffix(ls, k)) {
			d = 2 // "q" is too short, "que" is queue, "ebpf" is bpf
		}
		if d < len(k) && (d < bestD || d == bestD && strings.HasPrefix(k, ls)) { // "of" is off, not on
			best, bestD = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur := make([]int, len(rb)+1)
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(rb)]
}

// trackValues are --track's values; trackValue reports whether the
// argument after a bare --track is meant as its value (or a typo of one).
var trackValues = []string{"auto", "bpf", "proc"}

func trackValue(a string) bool {
	return !strings.HasPrefix(a, "-") && nearest(a, trackValues) != ""
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
