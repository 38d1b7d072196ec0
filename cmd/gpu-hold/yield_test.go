// yield_test.go owns the tests of --yield and --restart on the hold
// command's line (both parsed, and --restart refused without --yield
// before anything is queued) and of the keeper's mark in gpu-hold queue.
package main

import (
	"context"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/queue"
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

// gpu-hold queue says which tickets are a serve keeper's.
func TestQueueShowsYield(t *testing.T) {
	now := time.Now()
	var state column
	for _, c := range columns {
		if c.name == "state" {
			state = c
		}
	}
	keeper := ticketOf("gpu", queue.Ticket{Seq: 1, Yield: true, Created: now}, "holding", 0, now)
	job := ticketOf("gpu", queue.Ticket{Seq: 2, Created: now}, "waiting", 1, now)
	if got := state.cell(keeper); got != "holding,yields" {
		t.Errorf("a keeper's state cell: %q, want holding,yields", got)
	}
	if got := state.cell(job); got != "waiting" || job.Yield {
		t.Errorf("a job's state cell: %q (yield %v), want waiting", got, job.Yield)
	}
}
