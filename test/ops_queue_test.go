// ops_queue_test.go owns the operator commands against the real binary:
// queue over every resource (--me, -o, --noheader, its JSON names), cancel
// of a running hold by hold id (its teardown, cause cancelled, exit 77) and
// of a waiting one by label, wait HOLD-ID with the hold's code, history.
package test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/queue"
)

// opsHolding starts a hold of res labelled label and waits until it holds.
func opsHolding(t *testing.T, dir, mark, res, label string, args ...string) (*hold, queue.Ticket) {
	t.Helper()
	h := newHold(t, dir, mark, append([]string{"-r", res, "-l", label, "--track", "proc"}, args...)...).Start()
	st := qWaitFor(t, dir, res, label+" holding", qHeldBy(label))
	return h, *st.Holder
}

func TestQueueAllResources(t *testing.T) {
	dir := t.TempDir()
	mark := newMark(t)
	a, _ := opsHolding(t, dir, mark, "gpu", "alpha", "-t", "2h", "--", "sleep", "300")
	b, _ := opsHolding(t, dir, mark, "npu", "beta", "--", "sleep", "300")
	defer func() {
		for _, h := range []*hold{a, b} {
			h.Signal(syscall.SIGTERM)
			h.Wait(30 * time.Second)
		}
	}()
	w := newHold(t, dir, mark, "-l", "gamma", "--track", "proc", "--", "true").Start()
	qWaitFor(t, dir, "gpu", "gamma waiting", func(st queue.Status) bool { return len(st.Waiters) == 1 })
	defer func() { w.Signal(syscall.SIGTERM); w.Wait(30 * time.Second) }()

	r := qCmd(t, dir, "queue")
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	if r.Code != 0 || len(lines) != 4 {
		t.Fatalf("gpu-hold queue (no -r): exit %d, want a header and 3 tickets of 2 resources\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	for i, want := range [][]string{{"gpu", "holding", "alpha", "1h59m"}, {"gpu", "waiting", "gamma"}, {"npu", "holding", "beta", "none"}} {
		for _, s := range want {
			if !strings.Contains(lines[i+1], s) {
				t.Errorf("line %q lacks %q (a 2h max hold leaves 1h59m; no max hold: none)", lines[i+1], s)
			}
		}
	}
	r = qCmd(t, dir, "queue", "--noheader", "-o", "resource,label,state")
	if got := strings.Fields(r.Stdout); strings.Join(got, " ") != "gpu alpha holding gpu gamma waiting npu beta holding" {
		t.Errorf("queue --noheader -o resource,label,state: %q", r.Stdout)
	}
	if r := qCmd(t, dir, "queue", "-o", "resource,lable"); r.Code != 125 || !strings.Contains(r.Stderr, `did you mean \"label\"`) {
		t.Errorf("queue -o lable: exit %d\n%s", r.Code, r.Stderr)
	}
	if r := qCmd(t, dir, "queue", "--me", "--noheader", "-o", "label"); r.Code != 0 || len(strings.Fields(r.Stdout)) != 3 {
		t.Errorf("queue --me (all three are mine): %q", r.Stdout)
	}
	// JSON: "holding" is the ticket that holds, "process" its gpu-hold;
	// a waiter has no granted.
	r = qCmd(t, dir, "queue", "--json")
	var doc map[string][]map[string]any
	if err := json.Unmarshal([]byte(r.Stdout), &doc); err != nil || len(doc["resources"]) != 2 {
		t.Fatalf("queue --json: %v\n%s", err, r.Stdout)
	}
	gpu := doc["resources"][0]
	holding, _ := gpu["holding"].(map[string]any)
	waiting, _ := gpu["waiting"].([]any)
	if holding == nil || holding["process"] == nil || holding["holder"] != nil || holding["left_ms"] == nil || len(waiting) != 1 {
		t.Errorf("queue --json gpu: %v", gpu)
	} else if wt := waiting[0].(map[string]any); wt["granted"] != nil || wt["process"] == nil {
		t.Errorf("a waiter: %v (want no granted, a process)", wt)
	}
}

func TestCancelRunningHoldAndWait(t *testing.T) {
	dir := t.TempDir()
	mark := newMark(t)
	d := t.TempDir()
	payload := script(t, d, "root.sh", `( (trap "" TERM; put gc $BASHPID; exec sleep 300) & wait ) &
await gc
wait
`)
	h := newHold(t, dir, mark, append([]string{"-l", "alpha", "--track", "proc", "-g", "1s", "--"}, payload...)...)
	h.Env = append(h.Env, "GH_T="+d)
	h.Start()
	tk := *qWaitFor(t, dir, "gpu", "alpha holding", qHeldBy("alpha")).Holder
	readPid(t, filepath.Join(d, "gc"), 10*time.Second)
	waiter := newHold(t, dir, mark, "wait", tk.HoldID).Start()

	r := qCmd(t, dir, "cancel", tk.HoldID)
	if r.Code != 0 || !strings.Contains(r.Stdout, "asked the running hold alpha (ticket") {
		t.Fatalf("cancel %s: exit %d\n%s%s", tk.HoldID, r.Code, r.Stdout, r.Stderr)
	}
	hr := h.Wait(30 * time.Second)
	requireEnd(t, hr, 77, false)
	// (the waiter carries the mark too: it goes first.)
	if wr := waiter.Wait(30 * time.Second); wr.Code != 77 {
		t.Errorf("gpu-hold wait %s exited %d, want the hold's 77\n%s", tk.HoldID, wr.Code, wr.Stderr)
	}
	requireNoneLeft(t, mark)
	doc := showJSON(t, tk.Record)
	if doc.Hold.Cause != "cancelled" {
		t.Errorf("record cause %q, want cancelled", doc.Hold.Cause)
	}
	// Once it ended, wait exits at once with its code; history lists it.
	if r := qCmd(t, dir, "wait", tk.HoldID); r.Code != 77 {
		t.Errorf("wait on an ended hold: exit %d\n%s", r.Code, r.Stderr)
	}
	r = qCmd(t, dir, "history")
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	if r.Code != 0 || len(lines) != 2 || !strings.Contains(lines[1], "alpha") || !strings.Contains(lines[1], "cancelled") ||
		!strings.Contains(lines[1], " 77 ") || !strings.Contains(lines[1], tk.HoldID) {
		t.Errorf("history: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if r := qCmd(t, dir, "cancel", tk.HoldID); r.Code != 125 || !strings.Contains(r.Stderr, "no hold "+tk.HoldID) {
		t.Errorf("cancel of an ended hold: exit %d\n%s", r.Code, r.Stderr)
	}
}

func TestCancelWaitingByLabel(t *testing.T) {
	dir := t.TempDir()
	mark := newMark(t)
	a, _ := opsHolding(t, dir, mark, "gpu", "alpha", "--", "sleep", "300")
	defer func() { a.Signal(syscall.SIGTERM); a.Wait(30 * time.Second) }()
	b := newHold(t, dir, mark, "-l", "beta", "--track", "proc", "--", "true").Start()
	st := qWaitFor(t, dir, "gpu", "beta waiting", func(st queue.Status) bool { return len(st.Waiters) == 1 })
	waiter := newHold(t, dir, mark, "wait", st.Waiters[0].HoldID).Start()
	waitPidfd(t, waiter.Cmd.Process.Pid)
	r := qCmd(t, dir, "cancel", "--label", "beta")
	if r.Code != 0 || !strings.Contains(r.Stdout, "cancelled waiting beta (ticket") {
		t.Fatalf("cancel --label beta: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if br := b.Wait(30 * time.Second); br.Code != 75 {
		t.Errorf("the cancelled waiter exited %d, want 75", br.Code)
	}
	if wr := waiter.Wait(30 * time.Second); wr.Code != 125 || !strings.Contains(wr.Stderr, "ended before it took the token") {
		t.Errorf("gpu-hold wait on a waiter that was cancelled: exit %d, want 125 saying it never held\n%s", wr.Code, wr.Stderr)
	}
	if st := qStatus(t, dir, "gpu"); st.Holder == nil || st.Holder.Label != "alpha" {
		t.Errorf("cancel --label beta touched the holder: %+v", st)
	}
}

// waitPidfd waits until process pid holds a pidfd: gpu-hold wait has found
// the hold and waits on its gpu-hold.
func waitPidfd(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		fds, _ := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "fd", "*"))
		for _, fd := range fds {
			if l, _ := os.Readlink(fd); l == "anon_inode:[pidfd]" {
				return
			}
		}
	}
	t.Fatalf("gpu-hold wait (pid %d) never opened a pidfd", pid)
}
