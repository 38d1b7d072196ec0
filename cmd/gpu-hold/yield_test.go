// yield_test.go owns the tests of --yield and --restart on the hold
// command's line: both parsed, and --restart refused without --yield
// before anything is queued.
package main

import (
	"context"
	"testing"
)

func TestRunYieldFlags(t *testing.T) {
	opts, _, err := parseRun(t, "--yield", "--restart", "--", "server")
	if err != nil {
		t.Fatal(err)
	}
	if !opts.o.Yield || !opts.o.Restart {
		t.Errorf("--yield --restart parsed as yield %v, restart %v", opts.o.Yield, opts.o.Restart)
	}
	opts, _, err = parseRun(t, "--", "job")
	if err != nil || opts.o.Yield || opts.o.Restart {
		t.Errorf("defaults: yield %v, restart %v (%v), want both off", opts.o.Yield, opts.o.Restart, err)
	}
}

func TestRunRestartNeedsYield(t *testing.T) {
	dir := t.TempDir()
	opts, args, err := parseRun(t, "--restart", "--", "server")
	if err != nil {
		t.Fatal(err)
	}
	opts.g = testGlobal(dir, "gpu")
	wantUsageErr(t, runRun(context.Background(), opts, args), "--restart is for serve keepers: use it with --yield")
	if e := entries(t, dir); len(e) != 0 {
		t.Errorf("a refused --restart created %q", e)
	}
}
