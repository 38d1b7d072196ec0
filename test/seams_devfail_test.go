// seams_devfail_test.go owns the tests of a hold that does not hand its
// token on while the device is held (--device-holders=fail, and wait past
// its --device-wait): real holds of two users on a fleet directory, a fake
// character device node (mknod, a major no driver has), and an outside
// process of the first hold's user that holds the node after teardown;
// and a pool hold, which keeps its whole grant.
package test

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/plant"
	"github.com/gpu-hold/gpu-hold/internal/proc"
)

// dfKeeping is the start of the line a hold logs once it keeps the token.
const dfKeeping = "keeping the token: "

// dfHeldWhile is how long the test watches the next hold not start.
const dfHeldWhile = 4 * time.Second

// dfRig is one scene: the fleet, the fake node, the first hold (uid A)
// whose payload waits for go1, and the second (uid B) queued behind it.
type dfRig struct {
	f       *fleet
	mark    string
	scratch string
	node    string
	nodeF   *os.File // an O_PATH file of the node, for the outside holder
	first   *started
	second  *started
}

// dfStart makes the scene up to the point where the first hold's payload
// (which is to exit code) runs, its baseline scanned, and the second hold
// waits behind it.
func dfStart(t *testing.T, code int, flags ...string) *dfRig {
	t.Helper()
	f := newFleet(t, "proc")
	r := &dfRig{f: f, mark: newMark(t), scratch: f.Scratch}
	// root makes the resource's dirs, as an admin would.
	if w := f.Root.start(t, f.Dir, r.mark, "", "--", "true").Wait(30 * time.Second); w.Code != 0 {
		t.Fatalf("preparing the queue's dirs: exit %d\n%s", w.Code, w.Stderr)
	}
	r.node = filepath.Join(openDir(t), "fakegpu0")
	// A minor of its own: a holder of another test's node of the same
	// number would hold this one too.
	r.nodeF, _ = plant.FakeDevice(t, r.node, uint32(1000+rand.IntN(1<<19)))
	t.Cleanup(func() { r.nodeF.Close() })
	p1 := script(t, r.scratch, "first.sh", "put started1 $$\nawait go1\nexit "+strconv.Itoa(code)+"\n")
	args := append([]string{"-l", "devfail-first", "-g", "1s", "--survivor-wait", "1s", "--device", r.node}, flags...)
	r.first = f.A.start(t, f.Dir, r.mark, r.scratch, holdArgs(p1, args...)...)
	waitFile(t, filepath.Join(r.scratch, "started1"), 30*time.Second)
	p2 := script(t, r.scratch, "second.sh", "put ran2 $$\n")
	r.second = f.B.start(t, f.Dir, r.mark, r.scratch, holdArgs(p2, "-l", "devfail-second", "-g", "1s")...)
	dfWaitLog(t, r.second, "waiting for the token")
	return r
}

// holder starts the outside process: uid A's, marked, in a session of its
// own, with the node open (O_PATH) as fd 3, running body; it is not in
// the first hold's baseline (that was scanned before its payload ran).
func (r *dfRig) holder(t *testing.T, body string) *exec.Cmd {
	t.Helper()
	c := exec.Command("bash", "-c", body)
	c.Env = append(os.Environ(), markEnv+"="+newMark(t), "T="+r.scratch)
	c.ExtraFiles = []*os.File{r.nodeF}
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: userCred(uidA)}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	return c
}

// endPayload lets the first hold's payload exit: its teardown and device
// check follow.
func (r *dfRig) endPayload(t *testing.T) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(r.scratch, "go1"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// requireKept waits until the first hold reported id on the node, then
// checks for dfHeldWhile that the second hold's payload does not start,
// and that the first hold said it keeps the token for id.
func (r *dfRig) requireKept(t *testing.T, id proc.Ident) {
	t.Helper()
	dfWaitHolderReported(t, r.first, id)
	for deadline := time.Now().Add(dfHeldWhile); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if exists(filepath.Join(r.scratch, "ran2")) {
			t.Fatalf("the second hold's payload started while %v held %s: the token was handed on\nfirst hold's stderr:\n%s", id, r.node, r.first.Stderr())
		}
	}
	dfWaitLog(t, r.first, dfKeeping)
	line := dfLogged(r.first.Stderr(), dfKeeping)
	if !strings.Contains(line, r.node) || !strings.Contains(line, "pid "+strconv.Itoa(id.PID)) {
		t.Errorf("the keeping line does not name the node and the holder %v: %q", id, line)
	}
}

// finish waits for both holds: the first must exit code; the second must
// run its payload and exit 0. It returns the first's result.
func (r *dfRig) finish(t *testing.T, code int) result {
	t.Helper()
	r1 := r.first.Wait(60 * time.Second)
	requireEnd(t, r1, code, false)
	r2 := r.second.Wait(60 * time.Second)
	requireEnd(t, r2, 0, false)
	if !exists(filepath.Join(r.scratch, "ran2")) {
		t.Errorf("the second hold never ran its payload\nstderr:\n%s", r2.Stderr)
	}
	requireNoneLeft(t, r.mark)
	return r1
}

// dfRecordHolder is a device holder as the record has it.
type dfRecordHolder struct {
	PID          int    `json:"pid"`
	Start        uint64 `json:"start"`
	Node         string `json:"node"`
	KeptNS       int64  `json:"kept_ns"`
	HandedOnHeld string `json:"handed_on_held"`
}

// recordHolder returns the record's entry for id (failing when none).
func (r *dfRig) recordHolder(t *testing.T, res result, id proc.Ident) dfRecordHolder {
	t.Helper()
	out := ghRun(t, "show", recordOf(t, res.Stderr), "--format", "json")
	var doc struct {
		Hold struct {
			DeviceHolders []dfRecordHolder `json:"device_holders"`
		} `json:"hold"`
	}
	if out.Code != 0 || json.Unmarshal([]byte(out.Stdout), &doc) != nil {
		t.Fatalf("gpu-hold show: exit %d\n%s%s", out.Code, out.Stdout, out.Stderr)
	}
	for _, h := range doc.Hold.DeviceHolders {
		if h.PID == id.PID && h.Start == id.Start && h.Node == r.node {
			return h
		}
	}
	t.Fatalf("the record names no holder %v of %s: %+v", id, r.node, doc.Hold.DeviceHolders)
	return dfRecordHolder{}
}

// --device-holders=fail: an outside process (the first hold's user's)
// holds the node after teardown. The first hold reports it, keeps the
// token while it holds the node (the second hold, another user's, does not
// start), hands it on once it exits, and exits 73 with the holder on
// record.
//
// Catches: fail exiting 73 but releasing the token at once, the next
// payload running beside the holder; a keeping that never ends when the
// holder exits.
func TestDeviceFailKeepsTokenWhileHeld(t *testing.T) {
	t.Parallel()
	r := dfStart(t, 0, "--device-holders", "fail")
	h := r.holder(t, "exec -a "+holderName+" sleep 300")
	id := waitHolding(t, h.Process.Pid)
	r.endPayload(t)
	r.requireKept(t, id)
	if err := h.Process.Kill(); err != nil { // our own child: through its pidfd
		t.Fatal(err)
	}
	res := r.finish(t, 73)
	requireReported(t, res, outside{id: id}, r.node)
	if e := r.recordHolder(t, res, id); e.KeptNS <= 0 || e.HandedOnHeld != "" {
		t.Errorf("record entry %+v: want the time kept, and no hand-off while held", e)
	}
}

// --device-holders=wait past its --device-wait: the holder is still there
// when the bound runs out, and closes the node later without exiting. The
// token is kept until then (a re-read of the holder's fd table, since no
// exit tells), and the hold exits with its payload's own code.
//
// Catches: wait handing the token on when its bound runs out; a keeping
// that waits only for exits (it never ends here).
func TestDeviceWaitKeepsTokenPastItsBound(t *testing.T) {
	t.Parallel()
	r := dfStart(t, 5, "--device-holders", "wait", "--device-wait", "1s")
	letgo := filepath.Join(r.scratch, "letgo")
	if err := syscall.Mkfifo(letgo, 0o666); err != nil {
		t.Fatal(err)
	}
	os.Chmod(letgo, 0o666)
	// read blocks in open(2) until the test writes: no child of the
	// holder ever has the node (a fork would inherit it).
	h := r.holder(t, `read -r _ < "$T/letgo"; exec 3<&-; : > "$T/closed"; exec -a `+holderName+`-done sleep 300`)
	waitComm(t, h.Process.Pid, "bash", 10*time.Second)
	id := stat(t, h.Process.Pid).Ident
	r.endPayload(t)
	r.requireKept(t, id)
	if err := os.WriteFile(letgo, []byte("go\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFile(t, filepath.Join(r.scratch, "closed"), 20*time.Second)
	res := r.finish(t, 5)
	requireReported(t, res, outside{id: id}, r.node)
	if e := r.recordHolder(t, res, id); e.KeptNS <= 0 || e.HandedOnHeld != "" {
		t.Errorf("record entry %+v: want the time kept, and no hand-off while held", e)
	}
	if !proc.Alive(id) {
		t.Errorf("the outside holder %v is gone: it closed the node and was to live on", id)
	}
}

// A hold that keeps the token is still ended by TERM and by gpu-hold
// cancel (its user's): it hands the token on at once, exits 73, and its
// record says that the holder still held the device then, and why. The
// second hold then runs: beside the holder, which is the gap docs/SECURITY.md
// states (a successor does not check the device before it starts).
//
// Catches: a keeping that ignores signals or a cancel (an unkillable
// hold short of SIGKILL); a hand-off while held that the record hides.
func TestDeviceKeepEndsOnSignalOrCancel(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, why string
		end       func(t *testing.T, r *dfRig)
	}{
		{"TERM", "SIGTERM", func(t *testing.T, r *dfRig) { r.first.Signal(syscall.SIGTERM) }},
		{"cancel", "gpu-hold cancel", func(t *testing.T, r *dfRig) {
			if out, err := asUser(t, userCred(uidA), r.mark, bin, "--dir", r.f.Dir, "cancel", "--label", "devfail-first"); err != nil {
				t.Fatalf("gpu-hold cancel as uid A: %v\n%s", err, out)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := dfStart(t, 0, "--device-holders", "fail")
			h := r.holder(t, "exec -a "+holderName+" sleep 300")
			id := waitHolding(t, h.Process.Pid)
			r.endPayload(t)
			r.requireKept(t, id)
			tc.end(t, r)
			res := r.finish(t, 73)
			if e := r.recordHolder(t, res, id); !strings.Contains(e.HandedOnHeld, tc.why) {
				t.Errorf("record entry %+v: want it handed on while held, told to by %s", e, tc.why)
			}
			requireAlive(t, outside{id: id})
		})
	}
}

// A pool hold keeps its whole grant while its device is held: the next
// pool ticket, which asks for every device, does not start until the
// outside holder of the first hold's device exits. (Its clean devices are
// kept too: a pool grant gives its devices back only all at once.)
//
// Catches: a pool hold that releases its grant with its device held.
func TestDevicePoolKeepsItsDevice(t *testing.T) {
	t.Parallel()
	rg := rigFor("proc")
	mark := newMark(t)
	scratch, q := rg.dirs(t)
	devdir := t.TempDir()
	var nodes []string
	var files []*os.File
	for i := range 2 {
		p := filepath.Join(devdir, "fakegpu"+strconv.Itoa(i))
		f, _ := plant.FakeDevice(t, p, uint32(1000+rand.IntN(1<<19)))
		t.Cleanup(func() { f.Close() })
		nodes, files = append(nodes, p), append(files, f)
	}
	cfg := `{"gpu": {"devices": [], "pool": {"devices": [{"nodes": ["` + nodes[0] + `"]}, {"nodes": ["` + nodes[1] + `"]}]}}}`
	if err := os.WriteFile(filepath.Join(q, "resources.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	p1 := script(t, scratch, "first.sh", "put started1 $$\nawait go1\n")
	first := rg.start(t, q, mark, scratch, holdArgs(p1, "-n", "1", "-g", "1s", "--device-holders", "fail")...)
	waitFile(t, filepath.Join(scratch, "started1"), 30*time.Second)
	second := rg.start(t, q, mark, scratch, holdArgs(script(t, scratch, "second.sh", "put ran2 $$\n"), "-n", "2", "-g", "1s")...)
	dfWaitLog(t, second, "waiting for the token")
	// The holder holds both nodes, so whichever the first hold got.
	c := exec.Command("bash", "-c", "exec -a "+holderName+" sleep 300")
	c.Env = append(os.Environ(), markEnv+"="+newMark(t))
	c.ExtraFiles = files
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	id := waitHolding(t, c.Process.Pid)
	os.WriteFile(filepath.Join(scratch, "go1"), nil, 0o644)
	dfWaitHolderReported(t, first, id)
	for deadline := time.Now().Add(dfHeldWhile); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if exists(filepath.Join(scratch, "ran2")) {
			t.Fatalf("the pool ticket behind started while %v held the first hold's device\nfirst hold's stderr:\n%s", id, first.Stderr())
		}
	}
	dfWaitLog(t, first, dfKeeping)
	c.Process.Kill()
	requireEnd(t, first.Wait(60*time.Second), 73, false)
	requireEnd(t, second.Wait(60*time.Second), 0, false)
	if !exists(filepath.Join(scratch, "ran2")) {
		t.Error("the pool ticket behind never ran its payload")
	}
	requireNoneLeft(t, mark)
}

// endWhenKept waits until h (--device-holders=fail or wait) keeps its
// token for the outside holder o, then ends o (the test's own process):
// the hold keeps the token until o lets go.
func endWhenKept(t *testing.T, h *started, o outside) {
	t.Helper()
	dfWaitLog(t, h, dfKeeping)
	if err := o.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
}

// dfWaitLog waits (a bound for "did not hang") until h logged a line whose
// message starts with prefix.
func dfWaitLog(t *testing.T, h *started, prefix string) {
	t.Helper()
	for deadline := time.Now().Add(slowed(60 * time.Second)); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if dfLogged(h.Stderr(), prefix) != "" {
			return
		}
	}
	t.Fatalf("%v never logged %q:\n%s", h.Args, prefix, h.Stderr())
}

// dfLogged is the message of the first line of stderr that starts with
// prefix ("" when none).
func dfLogged(stderr, prefix string) string {
	lines := logLines(stderr)
	if i := findLog(lines, prefix); i >= 0 {
		return lines[i].msg()
	}
	return ""
}

// dfWaitHolderReported waits until h reported id as a device holder.
func dfWaitHolderReported(t *testing.T, h *started, id proc.Ident) {
	t.Helper()
	for deadline := time.Now().Add(slowed(60 * time.Second)); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		hs, _ := holdersReported(t, h.Stderr())
		for _, x := range hs {
			if x.PID == id.PID && x.Start == id.Start {
				return
			}
		}
	}
	t.Fatalf("%v never reported the holder %v:\n%s", h.Args, id, h.Stderr())
}
