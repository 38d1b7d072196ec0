// root_test.go owns the tests of the command line as a whole: every
// subcommand's bad flags and arguments exit 125 (hold.ExitUsage) with one
// line on stderr that names what was wrong, and create nothing; and the
// mapping of errors to exit codes.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gpu-hold/gpu-hold/hold"
)

// cli runs a gpu-hold command line in this process as execute does, with
// --dir set to a fresh directory (first, so that it also reaches a
// subcommand), and returns the exit code, stdout, stderr and the dir.
func cli(t *testing.T, args ...string) (code int, stdout, stderr, dir string) {
	t.Helper()
	dir = t.TempDir()
	root := newRootCmd(&globalOpts{})
	root.SetArgs(fixTrackArg(append([]string{"--dir=" + dir}, args...)))
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	code = exitCode(root.Execute(), &errOut)
	return code, out.String(), errOut.String(), dir
}

// wantUsage checks an exit 125 whose stderr is one line naming mention.
func wantUsage(t *testing.T, code int, stderr, mention string) {
	t.Helper()
	if code != hold.ExitUsage {
		t.Errorf("exit %d, want %d (usage)\nstderr:\n%s", code, hold.ExitUsage, stderr)
	}
	if !strings.HasPrefix(stderr, "gpu-hold: ") || strings.Count(stderr, "\n") != 1 || !strings.HasSuffix(stderr, "\n") {
		t.Errorf("want exactly one line on stderr starting gpu-hold:, got:\n%s", stderr)
	}
	if !strings.Contains(stderr, mention) {
		t.Errorf("the error does not name what was wrong (%q):\n%s", mention, stderr)
	}
}

// TestBadInputExitsUsage: each case fails before anything runs or is
// created, whether cobra refuses it (unknown flag, unparsable value, extra
// argument) or the command's xRun does (a value out of range).
func TestBadInputExitsUsage(t *testing.T) {
	for _, c := range []struct {
		args    string // split on spaces
		mention string
	}{
		// The hold command (the root): flags and durations.
		{"--bogus -- true", "--bogus"},
		{"-Z -- true", "'Z'"},
		{"-t", "'t'"}, // a flag that needs a value, given none
		{"-t soon -- true", `"soon"`},
		{"-t -1s -- true", `"-1s" for "-t, --max-hold" flag: must not be negative`},
		{"-t -1e-12 -- true", "--max-hold\" flag: must not be negative"}, // not 0, "no limit"
		{"-t 9999999999 -- true", "--max-hold\" flag: is longer than a time.Duration can hold"},
		{"-t 1e10 -- true", "longer than"},
		{"-t inf -- true", "longer than"},
		{"-t nan -- true", `"nan" for "-t, --max-hold" flag: not a duration`},
		{"-t 1:60:00 -- true", "not a duration"},
		{"-w later -- true", `"later"`},
		{"-w -5 -- true", `"-5" for "-w, --wait" flag: must not be negative`},
		{"-g 1x -- true", `"1x"`},
		{"-g=-1s -- true", "--grace\" flag: must not be negative"},
		{"--survivor-wait=-2s -- true", "--survivor-wait\" flag: must not be negative"},
		{"--device-wait=-1ms -- true", "--device-wait\" flag: must not be negative"},
		{"--record-age=never -- true", `"never"`},
		{"--keep-records=many -- true", `"many"`},
		{"--track=strace -- true", `"strace"`},
		{"--cgroup=maybe -- true", `"maybe"`},
		{"--device-holders=ignore -- true", `"ignore"`},
		{"--mem-floor=lots -- true", `"lots"`},
		// Global flags.
		{"-r", "'r'"},
		{"--log-format=xml -- true", `"xml"`},
		{"--log-format=xml queue", `"xml"`},
		// queue
		{"queue extra", `"extra"`},
		{"queue --json=maybe", `"maybe"`},
		{"queue --bogus", "--bogus"},
		// cancel
		{"cancel", "one ticket number"},
		{"cancel 1 2", "one ticket number"},
		{"cancel banana", `"banana" is not a ticket number`},
		{"cancel -5", "'5'"}, // a negative number reads as flags
		{"cancel --label a --user b", "one ticket number or hold id, or one of --label, --user"},
		{"cancel 3 --label a", "one ticket number or hold id"},
		{"cancel --user no-such-user-x", `--user "no-such-user-x" is neither a user name nor a uid`},
		{"cancel 20261201T223356-1f2e3d4c", "no hold 20261201T223356-1f2e3d4c is waiting for or holds a token"},
		{"cancel --label nobody", `no label "nobody" is waiting`},
		// queue
		{"queue -o ticket,lable", `-o: no column "lable": did you mean "label"?`},
		// history
		{"history extra", `"extra"`},
		{"history -n -1", "-n must not be negative"},
		{"history -r gpux", "gpux"},
		// wait
		{"wait", "wait takes one hold id"},
		{"wait 42", `"42" is not a hold id`},
		{"wait 20261201T223356-1f2e3d4c", "no hold 20261201T223356-1f2e3d4c is queued, holding, or on record"},
		{"wait --timeout=-1s 20261201T223356-1f2e3d4c", "must not be negative"},
		// reap
		{"reap extra", `"extra"`},
		{"reap --all=maybe", `"maybe"`},
		{"reap -g soon", `"soon"`},
		{"reap --survivor-wait=1y", `"1y"`},
		{"reap -g=-1s", "--grace\" flag: must not be negative"},
		{"reap --all --survivor-wait=-5", "--survivor-wait\" flag: must not be negative"},
		{"reap -g inf", "--grace\" flag: is longer than"},
		{"reap -g nan", "--grace\" flag: not a duration"},
		{"reap --survivor-wait=1e10", "longer than"},
		// show
		{"show", "exactly one RECORD"},
		{"show a b", "got 2 arguments"},
		{"show --format=yaml x", `"yaml" for "-f, --format" flag`},
		{"show --color=pink x", `"pink" for "--color" flag`},
		{"show no-such-hold", "no record no-such-hold"},
		// doctor
		{"doctor extra", `"extra"`},
		{"doctor --json=maybe", `"maybe"`},
	} {
		t.Run(c.args, func(t *testing.T) {
			code, _, stderr, dir := cli(t, strings.Fields(c.args)...)
			wantUsage(t, code, stderr, c.mention)
			if got := entries(t, dir); len(got) != 0 {
				t.Errorf("gpu-hold %s left %q in the queue dir", c.args, got)
			}
		})
	}
}

// TestExitCode: what exitCode prints and returns for each kind of error.
func TestExitCode(t *testing.T) {
	for _, c := range []struct {
		name   string
		err    error
		code   int
		stderr string
	}{
		{"success", nil, 0, ""},
		{"usage", usageErr("--x %q is bad", "y"), hold.ExitUsage, "gpu-hold: --x \"y\" is bad\n"},
		{"wrapped usage", fmt.Errorf("ctx: %w", usageErr("bad")), hold.ExitUsage, "gpu-hold: bad\n"},
		// The payload's own status: gpu-hold adds nothing to its stderr.
		{"payload status", &exitError{code: 3}, 3, ""},
		{"max hold", &exitError{code: hold.ExitMaxHold}, hold.ExitMaxHold, ""},
		// An error cobra made (its flag errors carry no code).
		{"cobra", errors.New(`unknown flag: --x`), hold.ExitUsage, "gpu-hold: unknown flag: --x (see gpu-hold --help)\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if got := exitCode(c.err, &stderr); got != c.code || stderr.String() != c.stderr {
				t.Errorf("exitCode(%v) = %d, stderr %q; want %d, %q", c.err, got, stderr.String(), c.code, c.stderr)
			}
		})
	}
}

// usageErr("%w", err) keeps err for errors.Is, as the callers of the
// queue's sentinel errors need.
func TestUsageErrWraps(t *testing.T) {
	base := errors.New("queue dir /x is not writable")
	err := usageErr("%w", base)
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != hold.ExitUsage || !errors.Is(err, base) || err.Error() != base.Error() {
		t.Errorf("usageErr(%%w, base) = %#v; want exit %d, wrapping base, same message", err, hold.ExitUsage)
	}
}
