// guard_test.go owns the tests of gpu-hold guard's command line: the
// usage errors it refuses before it watches anything, and that -r picks
// the one resource to guard.
package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestGuardUsage(t *testing.T) {
	for _, c := range []struct {
		name    string
		opts    func(o *guardOptions)
		mention string
	}{
		{"enforce without audit", func(o *guardOptions) { o.o.Enforce = true }, "--enforce needs --audit FILE"},
		{"no period", func(o *guardOptions) { o.o.Period = 0 }, "--period must be positive"},
		{"negative grace", func(o *guardOptions) { o.o.Grace = -time.Second }, "--grace must not be negative"},
		{"resource without nodes", func(o *guardOptions) { o.resSet = true; o.g.Resource = "fpga" }, "resource fpga has no device nodes"},
		{"missing allow-list", func(o *guardOptions) { o.allowPath = "/no/such/allow.json" }, "cannot open the allow-list"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			o := &guardOptions{g: testGlobal(dir, "gpu")}
			o.o.Period, o.o.Grace, o.o.Once = time.Second, time.Second, true
			c.opts(o)
			wantUsageErr(t, guardRun(context.Background(), o), c.mention)
		})
	}
}

// -r names the one resource; --once scans it and returns.
func TestGuardOnceResource(t *testing.T) {
	dir := t.TempDir()
	node := filepath.Join(t.TempDir(), "fake0")
	os.WriteFile(node, nil, 0o644)
	if err := os.WriteFile(filepath.Join(dir, "resources.json"), []byte(`{"fake": {"devices": ["`+node+`"]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	mdir := t.TempDir()
	code, _, stderr, _ := cli(t, "--dir", dir, "-r", "fake", "guard", "--once", "--metrics-dir", mdir)
	if code != 0 {
		t.Fatalf("guard --once -r fake: exit %d\n%s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(mdir, "gpu_hold_guard.prom")); err != nil {
		t.Errorf("no metrics written: %v", err)
	}
}
