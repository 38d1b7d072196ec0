//go:build !etcd

// fleet_exec_test.go tests gpu-hold's way to the fleet queue: no etcd
// backend in this build, an exec into gpu-hold-fleet instead, refused
// with what to install when that binary is missing or is this build.
package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPlainBuildExecsFleet(t *testing.T) {
	if fleet.early == nil {
		t.Fatal("no early step: gpu-hold would open the fleet queue itself, so it links the etcd client")
	}
	if _, err := fleet.resolve(&globalOpts{}); err == nil || !strings.Contains(err.Error(), fleetBinary) {
		t.Fatalf("resolve without gpu-hold-fleet beside the test binary: %v, want an error naming %s", err, fleetBinary)
	}
	// The test binary has no gpu-hold-fleet beside it.
	code, _, stderr, _ := cli(t, "--queue", "etcd://127.0.0.1:1/fleet", "queue")
	wantUsage(t, code, stderr, fleetBinary+" is not installed")
	t.Setenv(QueueEnv, "etcd://127.0.0.1:1/fleet")
	code, _, stderr, _ = cli(t, "-t", "1s", "--", "true")
	wantUsage(t, code, stderr, fleetBinary+" is not installed")
	// A queue that is no etcd URL is refused here, with what to use.
	code, _, stderr, _ = cli(t, "--queue", "/var/lib/x", "queue")
	wantUsage(t, code, stderr, `queue "/var/lib/x" is not an etcd URL`)
	// Commands that open no queue do not need it.
	if code, _, stderr, _ := cli(t, "completion", "bash"); code != 0 {
		t.Errorf("completion with $%s set: exit %d\n%s", QueueEnv, code, stderr)
	}
}

func TestFleetUsable(t *testing.T) {
	dir := t.TempDir()
	self, target := filepath.Join(dir, "gpu-hold"), filepath.Join(dir, fleetBinary)
	if err := os.WriteFile(self, []byte("#!/bin/true\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := fleetUsable(target, self); err == nil || !strings.Contains(err.Error(), "not installed") {
		t.Errorf("missing: %v", err)
	}
	if err := os.Symlink(self, target); err != nil {
		t.Fatal(err)
	}
	if err := fleetUsable(target, self); err == nil || !strings.Contains(err.Error(), "is this gpu-hold") {
		t.Errorf("a link to gpu-hold itself (it would exec for ever): %v", err)
	}
	if err := fleetUsable(target, target); err == nil || !strings.Contains(err.Error(), "built without") {
		t.Errorf("run as gpu-hold-fleet itself: %v", err)
	}
	os.Remove(target)
	if err := os.WriteFile(target, []byte("#!/bin/true\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := fleetUsable(target, self); err != nil {
		t.Errorf("installed: %v", err)
	}
}
