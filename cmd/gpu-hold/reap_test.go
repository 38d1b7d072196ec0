// reap_test.go owns the tests of gpu-hold reap's command line: --all with
// -r, and its output when there is nothing to reap, through reapRun.
package main

import (
	"bytes"
	"context"
	"testing"
	"time"
)

// --all with -r is allowed, and -r is then ignored: --all reaps every
// resource of the queue dir, -r's among them, and -r always has a value
// (gpu by default), so refusing the pair would refuse it for a flag the
// user may never have typed. Reaping more than named is safe: each dead
// holder is reaped with its own authority, as its next hold would.
func TestReapAllWithResource(t *testing.T) {
	for _, res := range []string{"npu", "no-such-resource"} {
		code, stdout, stderr, dir := cli(t, "reap", "--all", "-r", res)
		if code != 0 || stdout != dir+": no dead holder to reap (the token is free or its holder alive)\n" || stderr != "" {
			t.Errorf("reap --all -r %s: exit %d, stdout %q, stderr %q; want 0 and %q", res, code, stdout, stderr, dir+": no dead holder to reap")
		}
		if got := entries(t, dir); len(got) != 0 {
			t.Errorf("reap --all -r %s created %q", res, got)
		}
	}
}

// reapRun refuses negative durations before it opens anything.
func TestReapRunNegative(t *testing.T) {
	for _, c := range []struct {
		grace, survivorWait time.Duration
		mention             string
	}{
		{-time.Second, 0, "--grace must not be negative (got -1s)"},
		{time.Second, -time.Millisecond, "--survivor-wait must not be negative (got -1ms)"},
	} {
		dir := t.TempDir()
		var out bytes.Buffer
		err := reapRun(context.Background(), &reapOptions{g: testGlobal(dir, "gpu"), all: true, grace: c.grace, survivorWait: c.survivorWait, Out: &out})
		wantUsageErr(t, err, c.mention)
		if out.Len() != 0 || len(entries(t, dir)) != 0 {
			t.Errorf("a refused reap printed %q and left %q", out.String(), entries(t, dir))
		}
	}
}
