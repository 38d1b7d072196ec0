// fleet_exec_test.go owns the tests of gpu-hold's way to the fleet queue:
// the plain gpu-hold, asked for an etcd queue, replaces itself with
// gpu-hold-fleet from its own directory (the etcd route tests all go that
// way), and without gpu-hold-fleet it refuses, having made nothing.
package test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/etcdtest"
)

// The hold that runs the payload is gpu-hold-fleet, started as gpu-hold.
func TestFleetExecHolds(t *testing.T) {
	dir, mark := t.TempDir(), newMark(t)
	useEtcd(t, dir, etcdtest.Start(t))
	r := newHold(t, dir, mark, append([]string{"--track", "proc", "--"}, sh(`readlink /proc/$PPID/exe`)...)...).Run(60 * time.Second)
	if r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	if got := strings.TrimSpace(r.Stdout); got != filepath.Join(filepath.Dir(bin), "gpu-hold-fleet") {
		t.Errorf("the payload's hold is %q, want gpu-hold-fleet beside %s", got, bin)
	}
	if strings.Count(r.Stderr, `"token held through an etcd lease"`) != 1 {
		t.Errorf("want one grant logged\n%s", r.Stderr)
	}
}

// Without gpu-hold-fleet beside it, gpu-hold exits 125 naming what to
// install, before it has queued or made anything.
func TestFleetBinaryMissing(t *testing.T) {
	lone := t.TempDir()
	if err := os.Chmod(lone, 0o755); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(lone, "gpu-hold")
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(plain, b, 0o755); err != nil {
		t.Fatal(err)
	}
	dir, mark := t.TempDir(), newMark(t)
	ran := filepath.Join(t.TempDir(), "ran")
	for _, args := range [][]string{
		{"--dir", dir, "--queue", "etcd://127.0.0.1:1/none", "--track", "proc", "--", "touch", ran},
		{"--dir", dir, "--etcd-config", filepath.Join(dir, "etcd.json"), "queue"},
	} {
		r := runRaw(t, plain, nil, mark, t.TempDir(), args...)
		requireOneLineError(t, r, 125, "gpu-hold-fleet is not installed")
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("the command ran")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("the queue dir got %d entries, want none", len(ents))
	}
}
