// root.go owns the root command: the global flags every subcommand shares
// (--dir, -r, --log-format), logging set-up, and the mapping of errors to
// exit codes.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/gpu-hold/gpu-hold/hold"
	"github.com/gpu-hold/gpu-hold/internal/fleetenv"
	"github.com/gpu-hold/gpu-hold/internal/lobby"
)

// globalOpts are the flags every subcommand takes.
type globalOpts struct {
	Dir       string    // --dir; resolved by fleetenv.ResolveDir when empty
	Resource  string    // -r/--resource
	LogFormat string    // --log-format auto|console|json
	Fleet     fleetOpts // --queue and the etcd flags (fleet.go)
	Log       zerolog.Logger
}

// exitError carries an exit code out of a command's Run.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return "exit status " + strconv.Itoa(e.code)
	}
	return e.err.Error()
}
func (e *exitError) Unwrap() error { return e.err }

// usageErr is the one way to make an error that exits 125 (a usage error,
// or a failure of gpu-hold's own): format and arguments as for fmt.Errorf,
// so usageErr("%w", err) keeps err for errors.Is.
func usageErr(format string, a ...any) error {
	return &exitError{code: hold.ExitUsage, err: fmt.Errorf(format, a...)}
}

func execute(args []string) int {
	g := &globalOpts{}
	root := newRootCmd(g)
	root.SetArgs(fixTrackArg(args))
	return exitCodeTo(root.Execute(), newErrOut(os.Stderr, args))
}

// exitCode maps a command's error to gpu-hold's exit status, and writes
// the error's one line to stderr.
func exitCode(err error, stderr io.Writer) int { return exitCodeTo(err, errOut{w: stderr}) }

func exitCodeTo(err error, out errOut) int {
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			out.line(ee.err.Error(), ee.code)
		}
		return ee.code
	}
	// Errors from cobra itself (unknown flag, bad value) are usage errors.
	out.line(err.Error()+" (see gpu-hold --help)", hold.ExitUsage)
	return hold.ExitUsage
}

// setupLog builds the logger from --log-format: console on a terminal, JSON
// otherwise, unless the flag says which.
func (g *globalOpts) setupLog() error {
	l, err := fleetenv.NewLogger(os.Stderr, g.LogFormat)
	if err != nil {
		return usageErr("%v", err)
	}
	if onGitHub() {
		l = l.Hook(githubHook(os.Stderr))
	}
	g.Log = l
	return nil
}

// queueDir resolves --dir the same way for every subcommand.
func (g *globalOpts) queueDir() (string, error) {
	d, err := fleetenv.ResolveDir(g.Dir)
	if err != nil {
		return "", usageErr("%w", err)
	}
	return d, nil
}

func newRootCmd(g *globalOpts) *cobra.Command {
	root := newCmdRun(g, nil)
	root.SilenceErrors = true
	root.SilenceUsage = true
	root.Version = version()
	cobra.AddTemplateFunc("fleetAbout", func() string { return fleet.about() })
	cobra.AddTemplateFunc("lobbyAbout", lobby.About)
	root.SetVersionTemplate("gpu-hold {{.Version}}\nfleet queue (etcd): {{fleetAbout}}\nwaiting holds: {{lobbyAbout}}\n")
	pf := root.PersistentFlags()
	pf.StringVar(&g.Dir, "dir", "", "queue directory (default $GPU_HOLD_DIR, else /var/lib/gpu-hold when it exists, else the user's state dir)")
	pf.StringVarP(&g.Resource, "resource", "r", "gpu", "resource to queue for")
	choiceVar(pf, &g.LogFormat, "log-format", "log format: auto (console on a terminal, else JSON), console or json", "auto", "console", "json")
	addFleetFlags(pf, &g.Fleet)
	root.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
		// Before anything is made or logged: gpu-hold may exec
		// gpu-hold-fleet here, which then starts from the top.
		if opensQueue(cmd) {
			if err := g.fleetEarly(); err != nil {
				return err
			}
		}
		return g.setupLog()
	}
	suggestCommands(root)
	root.AddCommand(
		newCmdQueue(g),
		newCmdCancel(g),
		newCmdReap(g),
		newCmdShow(g),
		newCmdDoctor(g),
		newCmdGuard(g),
		newCmdHistory(g),
		newCmdWait(g),
	)
	root.AddCommand(newCmdMan(root), newCmdMakeSpares())
	setupCompletion(root, g)
	return root
}

// opensQueue says whether cmd may open a queue: not doctor (which reports
// on the fleet binary instead), man, help and the completion scripts.
func opensQueue(cmd *cobra.Command) bool {
	for c := cmd; c != nil; c = c.Parent() {
		switch c.Name() {
		case "doctor", "man", "help", "completion":
			return false
		}
	}
	return true
}
