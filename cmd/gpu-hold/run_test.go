// run_test.go owns the tests of the hold command's command line: its flags
// parsed into runOptions (through newCmdRun's runF seam, so no hold
// starts), where `--` must stand, and --track's optional value.
package main

import (
	"context"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/hold"
)

// parseRun parses args as the hold command does and returns the options
// and arguments runRun would be given, or cobra's error.
func parseRun(t *testing.T, args ...string) (*runOptions, []string, error) {
	t.Helper()
	var got *runOptions
	var gotArgs []string
	cmd := newCmdRun(testGlobal(t.TempDir(), "gpu"), func(_ context.Context, o *runOptions, a []string) error {
		got, gotArgs = o, a
		return nil
	})
	cmd.SetArgs(fixTrackArg(args))
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	err := cmd.Execute()
	return got, gotArgs, err
}

func TestRunFlagsParse(t *testing.T) {
	opts, args, err := parseRun(t, "-l", "bench", "-t", "2h", "-w", "45m", "-g", "1.5", "--survivor-wait=0",
		"--track", "proc", "--cgroup=off", "--device", "/dev/nvidia*", "--device", "/dev/dri/card0",
		"--mem-floor=8G", "--", "./bench.sh", "-t", "x", "--", "y")
	if err != nil {
		t.Fatal(err)
	}
	o := opts.o
	if o.Label != "bench" || o.MaxHold != 2*time.Hour || o.Wait != 45*time.Minute || o.Grace != 1500*time.Millisecond ||
		o.SurvivorWait != 0 || o.Track != "proc" || o.Cgroup != "off" || opts.memFloor != "8G" {
		t.Errorf("parsed %+v (mem-floor %q)", o, opts.memFloor)
	}
	if want := []string{"/dev/nvidia*", "/dev/dri/card0"}; !reflect.DeepEqual(o.Devices, want) {
		t.Errorf("--device: %q, want %q", o.Devices, want)
	}
	// After --, everything is the payload's, a second -- and its flags too.
	if want := []string{"./bench.sh", "-t", "x", "--", "y"}; opts.dashAt != 0 || !reflect.DeepEqual(args, want) {
		t.Errorf("args %q (-- at %d), want %q at 0", args, opts.dashAt, want)
	}
}

func TestRunFlagDefaults(t *testing.T) {
	opts, _, err := parseRun(t, "--", "true")
	if err != nil {
		t.Fatal(err)
	}
	o := opts.o
	if o.MaxHold != 0 || o.Wait != 0 || o.Grace != 10*time.Second || o.SurvivorWait != 30*time.Second ||
		o.DeviceWait != 30*time.Second || o.RecordAge != 30*24*time.Hour || o.KeepRecords != 200 ||
		o.Track != "auto" || o.Cgroup != "auto" || o.DeviceHolders != "warn" {
		t.Errorf("defaults: %+v", o)
	}
}

// Flags stop at the first argument that is not one: what follows is left
// for runRun, which then finds no -- before it.
func TestRunFlagsStopAtFirstArgument(t *testing.T) {
	opts, args, err := parseRun(t, "-l", "x", "job.sh", "-t", "1h", "--", "true")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"job.sh", "-t", "1h", "--", "true"}; !reflect.DeepEqual(args, want) || opts.dashAt >= 0 {
		t.Errorf("args %q (-- at %d), want %q with no -- seen", args, opts.dashAt, want)
	}
}

// TestRunDashDash: runRun refuses a command line whose payload is not
// exactly what follows --, before it looks at anything else.
func TestRunDashDash(t *testing.T) {
	for _, c := range []struct {
		name    string
		dashAt  int
		args    []string
		mention string
	}{
		{"no args, no --", -1, nil, "no command: give it after --"},
		{"no --", -1, []string{"job.sh", "arg"}, "put the command after --: gpu-hold [flags] -- job.sh"},
		{"argument before --", 1, []string{"stray", "job.sh"}, `unexpected argument "stray" before --`},
		{"nothing after --", 0, nil, "no command after --"},
	} {
		t.Run(c.name, func(t *testing.T) {
			opts := &runOptions{g: testGlobal(t.TempDir(), "gpu"), dashAt: c.dashAt}
			err := runRun(context.Background(), opts, c.args)
			wantUsageErr(t, err, c.mention)
		})
	}
}

// The same through the whole command line: exit 125, one line.
func TestRunDashDashCLI(t *testing.T) {
	for _, c := range []struct{ args, mention string }{
		{"", "no command"},
		{"--", "no command after --"},
		{"-t 1s --", "no command after --"},
		{"job.sh", "put the command after --"},
		{"queu", "-- queu"}, // a mistyped subcommand
		{"-l x stray -- job.sh", "put the command after --"},
	} {
		t.Run(c.args, func(t *testing.T) {
			code, _, stderr, _ := cli(t, strings.Fields(c.args)...)
			wantUsage(t, code, stderr, c.mention)
		})
	}
}

func TestFixTrackArg(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"--track proc -- x", "--track=proc -- x"},
		{"--track auto -l y -- x", "--track=auto -l y -- x"},
		{"--track -- x", "--track -- x"},                 // bare: bpf
		{"--track -l proc -- x", "--track -l proc -- x"}, // proc is -l's value
		{"-- x --track proc", "-- x --track proc"},       // the payload's own flag
		{"--track strace -- x", "--track strace -- x"},   // refused later, not rewritten
		{"-l a --track bpf -- --track proc", "-l a --track=bpf -- --track proc"},
	} {
		if got := strings.Join(fixTrackArg(strings.Fields(c.in)), " "); got != c.want {
			t.Errorf("fixTrackArg(%s) = %s, want %s", c.in, got, c.want)
		}
	}
	opts, args, err := parseRun(t, "--track", "--", "x")
	if err != nil {
		t.Fatal(err)
	}
	if opts.o.Track != "bpf" || !reflect.DeepEqual(args, []string{"x"}) {
		t.Errorf("bare --track: track %q args %q, want bpf and [x]", opts.o.Track, args)
	}
}

// wantUsageErr checks err is a one-line usage error naming mention.
func wantUsageErr(t *testing.T, err error, mention string) {
	t.Helper()
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != hold.ExitUsage {
		t.Fatalf("got %v, want a usage error (exit %d)", err, hold.ExitUsage)
	}
	if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, mention) {
		t.Errorf("error %q: want one line naming %q", msg, mention)
	}
}
