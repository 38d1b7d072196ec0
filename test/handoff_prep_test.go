// handoff_prep_test.go owns what a hold makes before its grant and removes
// after its release, off the hand-off: the payload's cgroup, made at the
// head of the queue (there while the hold waits first in line, the
// payload born in it, none left by a hold that ends without the token),
// and the eBPF lineage's pins, removed once the token is released.
package test

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/bpf"
	"github.com/gpu-hold/gpu-hold/internal/cgroup"
	"github.com/gpu-hold/gpu-hold/internal/testenv"
	"github.com/gpu-hold/gpu-hold/queue"
	"github.com/gpu-hold/gpu-hold/tracker"
)

func TestCgroupMadeAtHead(t *testing.T) {
	dir, mark := t.TempDir(), newMark(t)
	first := newHold(t, dir, mark, "--track=proc", "-l", "first", "--", "sleep", "300").Start()
	defer killMarked(mark)
	qWaitFor(t, dir, "gpu", "the first hold holding", qHeldBy("first"))
	for end := time.Now().Add(slowed(10 * time.Second)); !strings.Contains(first.Stderr(), "payload started") && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(first.Stderr(), `"cgroup":true`) {
		testenv.Need(t, "holds get no cgroup of their own here (cgroup v2 and root needed): %s", first.Stderr())
	}
	// The second waits first in line and is signalled; the third then
	// reaches the head, and holds once the first ends.
	second := newHold(t, dir, mark, "--track=proc", "-l", "second", "--", "true").Start()
	at := headCgroup(t, dir, "second")
	waitFile(t, at, 5*time.Second)
	third := newHold(t, dir, mark, "--track=proc", "-l", "third", "--", "cat", "/proc/self/cgroup").Start()
	second.Signal(syscall.SIGTERM)
	if r := second.Wait(20 * time.Second); r.Code != 128+int(syscall.SIGTERM) {
		t.Fatalf("the signalled waiter exited %d:\n%s", r.Code, r.Stderr)
	}
	if exists(at) {
		t.Fatalf("the waiter that never held left its cgroup %s behind", at)
	}
	at = headCgroup(t, dir, "third")
	waitFile(t, at, 5*time.Second)
	first.Signal(syscall.SIGTERM)
	r := third.Wait(30 * time.Second)
	if r.Code != 0 || !strings.HasSuffix(strings.TrimSpace(r.Stdout), strings.TrimPrefix(at, cgroup.Mount())) {
		t.Fatalf("the payload ran in %q (exit %d), want the cgroup made at the head, %s:\n%s", r.Stdout, r.Code, at, r.Stderr)
	}
}

// headCgroup waits until the hold labelled label is first in line, and
// names the cgroup it makes for its payload: gpu-hold-<hold id> beside the
// cgroup of the hold's own (the test's) process.
func headCgroup(t *testing.T, dir, label string) string {
	t.Helper()
	st := qWaitFor(t, dir, "gpu", label+" first in line", func(st queue.Status) bool {
		return len(st.Waiters) > 0 && st.Waiters[0].Label == label
	})
	return filepath.Join(cgroup.Mount(), cgroup.Own(), "gpu-hold-"+st.Waiters[0].HoldID)
}

// TestPinsGoAfterTheRelease: an eBPF hold's lineage is pinned while its
// payload runs, and the pins are gone once the hold has ended (they are
// removed after the release, off the next hold's way).
func TestPinsGoAfterTheRelease(t *testing.T) {
	if err := bpfUsable(); err != nil {
		testenv.NeedBPF(t, err)
	}
	dir, mark := t.TempDir(), newMark(t)
	pins := "/sys/fs/bpf/gpu-hold/$" + tracker.HoldIDEnv
	r := newHold(t, dir, mark, "--track=bpf", "--", "bash", "-c", "[ -d "+pins+" ] && echo pinned $"+tracker.HoldIDEnv).Run(30 * time.Second)
	id, ok := strings.CutPrefix(strings.TrimSpace(r.Stdout), "pinned ")
	if r.Code != 0 || !ok {
		t.Fatalf("the payload saw no pins of its hold (exit %d, %q):\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if exists(bpf.PinDir(id)) {
		t.Fatalf("hold %s ended and left its pins in %s", id, bpf.PinDir(id))
	}
}
