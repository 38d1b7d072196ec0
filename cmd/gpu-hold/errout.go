// errout.go owns how gpu-hold's own last word reaches stderr: the final
// error as one plain line, or as one JSON line under --log-format json; and,
// under GitHub Actions, errors and warnings also as workflow annotations
// (::error::, ::warning::) so a job's summary says why its hold ended.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/gpu-hold/gpu-hold/internal/termsafe"
)

// errOut is where the final error goes, and in which form.
type errOut struct {
	w      io.Writer
	json   bool // --log-format json: the error is a JSON line too
	github bool // GITHUB_ACTIONS=true: also an ::error:: annotation
}

// newErrOut reads the form from the command line as given: a flag error
// can stop parsing before --log-format is reached, and its line must be
// JSON all the same.
func newErrOut(w io.Writer, args []string) errOut {
	return errOut{w: w, json: jsonLogArg(args), github: onGitHub()}
}

func onGitHub() bool { return os.Getenv("GITHUB_ACTIONS") == "true" }

// jsonLogArg reports whether gpu-hold's own flags (those before --) ask for
// --log-format json.
func jsonLogArg(args []string) bool {
	json := false
	for i, a := range args {
		switch {
		case a == "--":
			return json
		case a == "--log-format" && i+1 < len(args):
			json = args[i+1] == "json"
		case strings.HasPrefix(a, "--log-format="):
			json = strings.TrimPrefix(a, "--log-format=") == "json"
		}
	}
	return json
}

// line writes gpu-hold's final error, msg, with the exit code it ends in.
func (e errOut) line(msg string, code int) {
	if e.json {
		enc := json.NewEncoder(e.w) // one line, & < > as themselves
		enc.SetEscapeHTML(false)
		enc.Encode(struct {
			Level    string `json:"level"`
			Prog     string `json:"prog"`
			ExitCode int    `json:"exit_code"`
			Time     string `json:"time"`
			Message  string `json:"message"`
		}{"error", "gpu-hold", code, time.Now().Format(time.RFC3339Nano), msg})
	} else {
		fmt.Fprintln(e.w, "gpu-hold: "+termsafe.Lines(msg)) // it may quote another user's ticket
	}
	if e.github {
		annotate(e.w, "error", msg)
	}
}

// annotate writes a GitHub Actions workflow command: one line, with the
// characters the runner treats as line ends escaped.
func annotate(w io.Writer, kind, msg string) {
	msg = strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(termsafe.Lines(msg))
	fmt.Fprintf(w, "::%s::gpu-hold: %s\n", kind, msg)
}

// githubHook annotates the log's warnings and errors.
func githubHook(w io.Writer) zerolog.HookFunc {
	return func(_ *zerolog.Event, level zerolog.Level, msg string) {
		switch {
		case level == zerolog.WarnLevel:
			annotate(w, "warning", msg)
		case level >= zerolog.ErrorLevel && level <= zerolog.PanicLevel:
			annotate(w, "error", msg)
		}
	}
}
