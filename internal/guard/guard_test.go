// guard_test.go owns the guard's unit tests: the end of an intruder whose
// pid now names another process (recycled) is refused, and the
// allow-list refuses what would allow too much or could be forged.
package guard

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/gpu-hold/gpu-hold/internal/device"
	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/testenv"
)

// newTestGuard is a guard of resource "fake" (a file in a temp dir).
func newTestGuard(t *testing.T) *Guard {
	t.Helper()
	dir := t.TempDir()
	node := filepath.Join(t.TempDir(), "fake0")
	os.WriteFile(node, nil, 0o644)
	cfg, _ := json.Marshal(map[string]device.Resource{"fake": {Devices: []string{node}}})
	if err := os.WriteFile(filepath.Join(dir, device.ResourcesFile), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	g, err := New(Options{Dir: dir, Resources: []string{"fake"}, Period: time.Second, Enforce: true, Grace: time.Second,
		AuditPath: filepath.Join(t.TempDir(), "audit.jsonl"), Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.close)
	return g
}

// A recorded intruder died and its pid now names another process: the
// guard must not signal that process.
func TestEndRefusesRecycledPid(t *testing.T) {
	g := newTestGuard(t)
	c := exec.Command("sleep", "300")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { c.Process.Kill(); c.Wait() }()
	st, err := proc.ReadStat(c.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	// What the guard saw: the same pid, an older start time.
	seen := proc.Ident{PID: st.PID, Start: st.Start - 1}
	k := key{"fake", seen}
	g.ending.Add(1)
	g.end(context.Background(), k, intruder{Holder: device.Holder{Ident: seen, Node: "/dev/fake0"}, Resource: "fake"})
	if !proc.Alive(st.Ident) {
		t.Fatal("the process now at the recycled pid was signalled")
	}
	b, _ := os.ReadFile(g.audit.f.Name())
	if !strings.Contains(string(b), `"action":"refused"`) || !strings.Contains(string(b), "cannot identify") {
		t.Errorf("audit does not record the refused end: %s", b)
	}
}

func TestAllowList(t *testing.T) {
	write := func(t *testing.T, body string, mode os.FileMode) string {
		p := filepath.Join(t.TempDir(), "allow.json")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
		return p
	}
	t.Run("an entry without fields", func(t *testing.T) {
		if _, err := LoadAllowList(write(t, `{"allow": [{}]}`, 0o644)); err == nil {
			t.Fatal("an entry that allows everything was accepted")
		}
	})
	t.Run("writable by others", func(t *testing.T) {
		if _, err := LoadAllowList(write(t, `{"allow": [{"uid": 0}]}`, 0o666)); err == nil {
			t.Fatal("an allow-list others can write was accepted")
		}
	})
	t.Run("a symlink", func(t *testing.T) {
		p := write(t, `{"allow": [{"uid": 0}]}`, 0o644)
		l := filepath.Join(t.TempDir(), "link.json")
		os.Symlink(p, l)
		if _, err := LoadAllowList(l); err == nil {
			t.Fatal("an allow-list through a symlink was accepted")
		}
	})
	t.Run("matching", func(t *testing.T) {
		a, err := LoadAllowList(write(t, `{"allow": [{"uid": 4242}, {"exe": "/no/such/exe"}]}`, 0o644))
		if err != nil {
			t.Fatal(err)
		}
		self, _ := proc.Self()
		if !a.allows(self, 4242) {
			t.Error("uid 4242 not allowed")
		}
		if a.allows(self, 4243) {
			t.Error("uid 4243 allowed (and this test's exe is not listed)")
		}
	})
}

// An exe entry allows the very file it names, not whatever a process shows
// at that path: one that mounted a program of its own over the path, in a
// mount namespace of its own, shows the path in /proc/PID/exe.
func TestAllowListExeIsTheFile(t *testing.T) {
	testenv.NeedRoot(t, "a mount namespace")
	for _, tool := range []string{"unshare", "mount", "sleep"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Need(t, "no %s: %v", tool, err)
		}
	}
	d := t.TempDir()
	allowed, own := filepath.Join(d, "allowed"), filepath.Join(d, "own")
	sleep, _ := exec.LookPath("sleep")
	for _, p := range []string{allowed, own} {
		b, err := os.ReadFile(sleep)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	a := &AllowList{Allow: []AllowEntry{{Exe: allowed}}}
	start := func(script string) proc.Ident {
		c := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", allowed, own)
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", c.Process.Pid)); exe == allowed {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("test shape: the process never ran as " + allowed)
			}
		}
		st, err := proc.ReadStat(c.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		return st.Ident
	}
	if real := start(`exec "$1" 60`); !a.allows(real, 0) || !a.allowsExe(real, 0) {
		t.Error("the allow-listed program itself is not allowed")
	}
	if fake := start(`mount --bind "$2" "$1" && exec "$1" 60`); a.allows(fake, 0) || a.allowsExe(fake, 0) {
		t.Error("a program mounted over the allow-listed path, in a mount namespace of its own, is allowed")
	}
}
