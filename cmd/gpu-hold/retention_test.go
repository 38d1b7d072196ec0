// retention_test.go owns the tests of the retention flags: a negative
// --keep-records is refused before anything is queued, and --help says
// whose records the flags prune and where the admin sets the rest.
package main

import (
	"strings"
	"testing"
)

func TestKeepRecordsNegativeRefused(t *testing.T) {
	for _, args := range []string{"--keep-records -1 -- true", "--keep-records=-5 -- true"} {
		t.Run(args, func(t *testing.T) {
			code, _, stderr, dir := cli(t, strings.Fields(args)...)
			wantUsage(t, code, stderr, "--keep-records must not be negative")
			if !strings.Contains(stderr, "0 for no count limit") {
				t.Errorf("the refusal does not say what 0 means:\n%s", stderr)
			}
			if got := entries(t, dir); len(got) != 0 {
				t.Errorf("gpu-hold %s left %q in the queue dir", args, got)
			}
		})
	}
}

func TestRetentionFlagsHelp(t *testing.T) {
	code, out, stderr, _ := cli(t, "--help")
	if code != 0 {
		t.Fatalf("--help: exit %d\n%s", code, stderr)
	}
	for _, want := range []string{"your own finished records kept per resource", "0: no count limit", "settings.json", "0: no age limit"} {
		if !strings.Contains(out, want) {
			t.Errorf("--help does not say %q:\n%s", want, out)
		}
	}
}
