// seams_keeping_test.go owns the tests of what the queue shows of a hold
// that keeps its token after its payload ended while a process outside
// its lineage holds the device (--device-holders=fail): another user's
// gpu-hold queue and a waiter whose allowance runs out name the node and
// that process, and follow the device when it changes hands.
package test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/proc"
)

// keptHolder is what uid B's gpu-hold queue --json says the holder keeps
// the token for: the first process named (pid 0: nothing).
func keptHolder(t *testing.T, r *dfRig) (pid int, node string) {
	t.Helper()
	out, err := asUser(t, userCred(uidB), r.mark, bin, "--dir", r.f.Dir, "queue", "--json")
	var doc struct {
		Resources []struct {
			Holding *struct {
				Keeping *struct {
					Holders []struct {
						PID  int    `json:"pid"`
						Node string `json:"node"`
					} `json:"holders"`
				} `json:"keeping"`
			} `json:"holding"`
		} `json:"resources"`
	}
	if err != nil || json.Unmarshal([]byte(out), &doc) != nil {
		t.Fatalf("gpu-hold queue --json as uid B: %v\n%s", err, out)
	}
	for _, res := range doc.Resources {
		if h := res.Holding; h != nil && h.Keeping != nil && len(h.Keeping.Holders) > 0 {
			return h.Keeping.Holders[0].PID, h.Keeping.Holders[0].Node
		}
	}
	return 0, ""
}

// waitKept waits until uid B's gpu-hold queue names pid as what the
// holder keeps the token for, on the rig's node.
func waitKept(t *testing.T, r *dfRig, pid int) {
	t.Helper()
	for deadline := time.Now().Add(slowed(30 * time.Second)); ; time.Sleep(50 * time.Millisecond) {
		got, node := keptHolder(t, r)
		if got == pid && node == r.node {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("gpu-hold queue never said the token is kept for pid %d on %s (last: pid %d on %q)\nfirst hold's stderr:\n%s", pid, r.node, got, node, r.first.Stderr())
		}
	}
}

// The first hold (uid A) keeps its token for an outside process of its
// user that holds the node. uid B's gpu-hold queue names that process and
// the node; a third hold (uid B) whose -w runs out says why the token did
// not come. The outside process forks a child that inherits the node and
// exits: the queue follows the device to the child. Once the child is
// gone the token goes on.
//
// Catches: a keeping nobody but the holder's own log can see; a note
// that names a process that no longer holds the device.
func TestDeviceKeepingShownToOthers(t *testing.T) {
	t.Parallel()
	r := dfStart(t, 0, "--device-holders", "fail")
	hand := filepath.Join(r.scratch, "hand")
	if err := syscall.Mkfifo(hand, 0o666); err != nil {
		t.Fatal(err)
	}
	os.Chmod(hand, 0o666)
	mark := newMark(t)
	c := exec.Command("bash", "-c", `read -r _ < "$T/hand"; (exec -a `+holderName+` sleep 300) & echo $! > "$T/child"; exit 0`)
	c.Env = append(os.Environ(), markEnv+"="+mark, "T="+r.scratch)
	c.ExtraFiles = []*os.File{r.nodeF}
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: userCred(uidA)}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait(); killMarked(mark) })
	waitComm(t, c.Process.Pid, "bash", 10*time.Second)
	id := stat(t, c.Process.Pid).Ident
	r.endPayload(t)
	r.requireKept(t, id)
	waitKept(t, r, id.PID)

	p3 := script(t, r.scratch, "third.sh", "put ran3 $$\n")
	third := r.f.B.start(t, r.f.Dir, r.mark, r.scratch, holdArgs(p3, "-l", "devfail-third", "-w", "2s")...)
	res3 := third.Wait(60 * time.Second)
	if res3.Code != 75 || !strings.Contains(res3.Stderr, "the holder keeps the token while "+r.node+" is held by pid "+strconv.Itoa(id.PID)) {
		t.Errorf("the third hold, whose -w ran out: exit %d, want 75 and a message that says why the token is kept\n%s", res3.Code, res3.Stderr)
	}

	if err := os.WriteFile(hand, []byte("go\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(); err != nil {
		t.Fatalf("the outside holder: %v", err)
	}
	child := waitHolding(t, readPid(t, filepath.Join(r.scratch, "child"), 20*time.Second))
	waitKept(t, r, child.PID)
	if exists(filepath.Join(r.scratch, "ran2")) {
		t.Fatalf("the second hold ran while the child %v held the node", child)
	}
	killMarked(mark)
	r.finish(t, 73)
	if proc.Alive(child) {
		t.Errorf("the child %v outlived killMarked", child)
	}
}
