// show.go owns `gpu-hold show RECORD`: read a hold's lineage record and
// render it as a tree (like pstree), the assembled JSON document, or a
// Chrome/Perfetto timeline. The record is read, and -o FILE written,
// without following a symlink or opening a special file (safefs).
package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/record"
	"github.com/gpu-hold/gpu-hold/internal/safefs"
	"github.com/gpu-hold/gpu-hold/internal/termsafe"
)

type showOptions struct {
	g      *globalOpts
	Record string // a record file, or a hold id of the resource
	Format string // tree, json, timeline
	Output string // -o FILE; "" or "-" is standard output
	Color  string // auto, always, never
	Out    io.Writer
	ErrOut io.Writer
	// isTerminal says whether standard output is a terminal (auto colour).
	isTerminal func() bool
}

func newCmdShow(g *globalOpts) *cobra.Command {
	opts := &showOptions{g: g}
	cmd := &cobra.Command{
		Use:   "show RECORD [--format tree|json|timeline] [-o FILE]",
		Short: "Show what a hold spawned and how each process ended",
		Long: `show reads a hold's lineage record (a file, or the hold id of a record in the resource's
records directory) and renders it:

  tree      each process under the one that forked it, with its command, lifetime, fate
            (exited, term, kill, killed-at-birth, survivor) and flags (left-group,
            left-session, reparented); coloured on a terminal
  json      the assembled record as one JSON document

The record of a running hold (its gpu-hold alive) is shown as it stands: the lineage so
far, its members with no exit seen marked running.
  timeline  Chrome trace event JSON: open it in https://ui.perfetto.dev

Whose file the record is comes from its owner, never from what it says: the tree's header
says it (file: ...), json has "writer", timeline "otherData". A record whose file's owner is
not the holder it names (another user planted or rewrote it) starts with a warning that says
so: its content is that user's claim.

A record cut short by a killed hold is shown up to its last whole line. A damaged record
is an error that names the line (exit 125). The format is documented in docs/RECORD.md.`,
		Example: `  gpu-hold show /var/lib/gpu-hold/gpu/records/HOLD.jsonl
  gpu-hold show -r gpu HOLD-ID --format timeline -o hold.trace.json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErr("show needs exactly one RECORD (a record file or a hold id), got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Record = args[0]
			opts.Out, opts.ErrOut = cmd.OutOrStdout(), cmd.ErrOrStderr()
			opts.isTerminal = func() bool { return isatty.IsTerminal(os.Stdout.Fd()) }
			return showRun(opts)
		},
	}
	f := cmd.Flags()
	choiceVar(f, &opts.Format, "format", "output format: tree, json or timeline (Chrome trace JSON for ui.perfetto.dev)", "tree", "json", "timeline")
	f.Lookup("format").Shorthand = "f"
	f.StringVarP(&opts.Output, "output", "o", "", "write to FILE instead of standard output")
	choiceVar(f, &opts.Color, "color", "colour the tree: auto (on a terminal, unless NO_COLOR is set), always, never", "auto", "always", "never")
	return cmd
}

func showRun(opts *showOptions) error {
	switch opts.Format {
	case "tree", "json", "timeline":
	default:
		return usageErr("--format %q is not one of tree, json, timeline", opts.Format)
	}
	switch opts.Color {
	case "auto", "always", "never":
	default:
		return usageErr("--color %q is not one of auto, always, never", opts.Color)
	}
	path, err := opts.resolve()
	if err != nil {
		return err
	}
	rec, err := record.ReadRecord(path)
	if err != nil {
		return usageErr("%v (cannot show this record)", err)
	}
	// Whose it is comes from the file's owner, never from what it says.
	rec.SetWriter(knownUserName)
	// A record without its end line is a running hold's when its holder
	// is alive, by identity (a reused pid is not it).
	rec.Running = !rec.Ended && proc.Alive(rec.Hold.Holder)
	if rec.Truncated && opts.Format != "tree" {
		fmt.Fprintf(opts.ErrOut, "gpu-hold: record %s: its last line was cut short (the hold was killed) and is left out\n", path)
	}

	out, toFile := opts.Out, opts.Output != "" && opts.Output != "-"
	var f *os.File
	if toFile {
		if f, err = createOutput(opts.Output); err != nil {
			return usageErr("cannot write %s: %v", opts.Output, err)
		}
		defer f.Close()
		out = f
	}
	bw := bufio.NewWriter(out)
	switch opts.Format {
	case "tree":
		color := opts.Color == "always" ||
			(opts.Color == "auto" && !toFile && os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "dumb" && opts.isTerminal != nil && opts.isTerminal())
		err = record.RenderTree(bw, rec, record.TreeOptions{Color: color})
	case "json":
		err = record.RenderJSON(bw, rec)
	case "timeline":
		err = record.RenderTimeline(bw, rec)
	}
	if err == nil {
		err = bw.Flush()
	}
	if err == nil && f != nil {
		err = f.Close()
	}
	if err != nil {
		return usageErr("writing the %s of %s: %v", opts.Format, path, err)
	}
	if toFile && opts.Format == "timeline" {
		fmt.Fprintf(opts.ErrOut, "gpu-hold: wrote %s: open it in https://ui.perfetto.dev\n", opts.Output)
	}
	return nil
}

// knownUserName is uid's user name, or "" when it has none.
func knownUserName(uid int) string {
	if n := userName(uid); n != strconv.Itoa(uid) {
		return n
	}
	return ""
}

// createOutput creates -o FILE, or truncates it when it is the caller's own
// regular file: a symlink, FIFO or another user's file planted at the name
// or on the way (in /tmp, say) is never followed, opened or truncated.
func createOutput(path string) (*os.File, error) {
	d, err := safefs.OpenUserDir(filepath.Dir(path), 0)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	f, _, err := d.CreateOrTruncate(filepath.Base(path), 0o644)
	return f, err
}

// resolve finds the record: a file, else a hold id in the resource's
// records directory.
func (opts *showOptions) resolve() (string, error) {
	arg := opts.Record
	if _, err := os.Stat(arg); err == nil {
		return arg, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", usageErr("cannot read record %s: %v", arg, err)
	}
	if !strings.ContainsRune(arg, '/') && opts.g != nil {
		if dir, err := opts.g.findDir(); err == nil {
			id := strings.TrimSuffix(arg, ".jsonl")
			p := record.RecordPath(filepath.Join(dir, opts.g.Resource), id)
			if c := recordCandidates(p, id); len(c) > 1 {
				// Someone made a file at the usual name first, and the hold
				// wrote its own under a fresh one: show says whose each is.
				fmt.Fprintf(os.Stderr, "hold %s has records under other names too (its usual one was taken): %s\n", termsafe.Text(id), termsafe.Text(strings.Join(c[1:], ", ")))
				if !exists(p) {
					return c[1], nil
				}
			}
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
			return "", usageErr("no record %s: it is neither a file nor a hold id of resource %s (looked for %s); give the record's path", arg, opts.g.Resource, p)
		}
	}
	return "", usageErr("no record %s: give the path of a record file (records live in <queue dir>/<resource>/records/)", arg)
}
