// trust_files_test.go owns the multi-user tests of untrusted files in the shared queue dir (issue 16; ESCAPES T2, T3, T4, T6).
package test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/record"
)

// tfBound bounds every hold of these tests: a hold that hangs on a planted
// file fails the test with its stderr, it never runs into the go test
// timeout.
const tfBound = 15 * time.Second

// tfFlags are the flags of every hold here: a bounded wait, short grace.
var tfFlags = []string{"-w", "20s", "-g", "1s", "--survivor-wait", "1s"}

// tfStart starts a hold of rg in the fleet's dir, payload after --.
func tfStart(t *testing.T, f *fleet, rg rig, mark string, flags []string, payload ...string) *started {
	t.Helper()
	args := append(append(append([]string{}, tfFlags...), flags...), "--")
	return rg.start(t, f.Dir, mark, f.Scratch, append(args, payload...)...)
}

// tfRun runs a hold to its end and checks it exited 0 within tfBound.
func tfRun(t *testing.T, f *fleet, rg rig, mark string, flags []string, payload ...string) result {
	t.Helper()
	r := tfStart(t, f, rg, mark, flags, payload...).Wait(tfBound)
	if r.Code != 0 {
		t.Errorf("%s's hold exited %d, want 0\nstderr:\n%s", rg.Name, r.Code, r.Stderr)
	}
	return r
}

// tfFleet is newFleet with the gpu resource dir and its records/ made as
// an admin (dist/tmpfiles.d, or root's first hold) makes them: root's, the
// fleet group's, 03775. Without them, whichever hold comes first makes
// them, and a user's hold that wins the race would own the queue (and
// other users' holds refuse a records/ a user owns).
func tfFleet(t *testing.T) *fleet {
	t.Helper()
	f := newFleet(t, "proc")
	adminDir(t, adminDir(t, f.Dir, "gpu"), "records")
	return f
}

// tfNoRecordsDir removes the records/ tfFleet made: a fleet whose admin
// did not make it.
func tfNoRecordsDir(t *testing.T, f *fleet) {
	t.Helper()
	if err := os.Remove(filepath.Join(f.Dir, "gpu", "records")); err != nil {
		t.Fatal(err)
	}
}

// tfWarm runs one root hold so that the resource dir has root's token,
// seq (ticket 1 taken) and records/. flags may send its record elsewhere
// (--dump), so that no records/ is made.
func tfWarm(t *testing.T, f *fleet, mark string, flags ...string) {
	t.Helper()
	r := tfRun(t, f, f.Root, mark, flags, "true")
	if t.Failed() {
		t.Fatalf("harness: the warm-up hold failed\n%s", r.Stderr)
	}
}

// tfSh runs script under sh as cred (nil: root), failing the test when it
// fails: this is how a hostile user plants files, with its own uid.
func tfSh(t *testing.T, cred *syscall.Credential, mark, script string) {
	t.Helper()
	if out, err := asUser(t, cred, mark, "sh", "-c", script); err != nil {
		t.Fatalf("harness: planting as %v: %v\n%s\nscript: %s", credUID(cred), err, out, script)
	}
}

func credUID(c *syscall.Credential) int {
	if c == nil {
		return 0
	}
	return int(c.Uid)
}

// tfRequirePlanted checks, before a hold runs, that path is really a file
// of kind (unix.S_IFIFO, S_IFLNK, S_IFREG, S_IFDIR) owned by uid, so that a
// failure is the product's, not a planting that did not happen.
func tfRequirePlanted(t *testing.T, path string, kind uint32, uid int) unix.Stat_t {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		t.Fatalf("harness: planted %s is not there: %v", path, err)
	}
	if st.Mode&unix.S_IFMT != kind || int(st.Uid) != uid {
		t.Fatalf("harness: planted %s has mode %o and uid %d, want type %o and uid %d", path, st.Mode, st.Uid, kind, uid)
	}
	return st
}

// tfOutside is a directory outside the fleet directory with a sentinel
// file of known content: what a planted symlink or hard link points at.
// Nothing in it may change and nothing may appear beside the sentinel.
type tfOutside struct {
	Dir, Sentinel string
	want          map[string]string // name -> content
}

const tfSentinelText = "sentinel: gpu-hold must never write this\n"

// tfNewOutside makes the directory as root (mode 0755) with its sentinel.
func tfNewOutside(t *testing.T) *tfOutside {
	t.Helper()
	d := openDir(t)
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	o := &tfOutside{Dir: d, Sentinel: filepath.Join(d, "sentinel"), want: map[string]string{"sentinel": tfSentinelText}}
	if err := os.WriteFile(o.Sentinel, []byte(tfSentinelText), 0o644); err != nil {
		t.Fatal(err)
	}
	return o
}

// check fails the test when anything in the directory was written,
// truncated, created or removed.
func (o *tfOutside) check(t *testing.T) {
	t.Helper()
	ents, err := os.ReadDir(o.Dir)
	if err != nil {
		t.Fatalf("reading %s: %v", o.Dir, err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
		want, ok := o.want[e.Name()]
		if !ok {
			t.Errorf("a file appeared outside the queue dir, at the target of a planted file: %s", filepath.Join(o.Dir, e.Name()))
			continue
		}
		if b, err := os.ReadFile(filepath.Join(o.Dir, e.Name())); err != nil || string(b) != want {
			t.Errorf("%s outside the queue dir was written through a planted file: %q (%v), want %q", filepath.Join(o.Dir, e.Name()), b, err, want)
		}
	}
	for n := range o.want {
		if !slices.Contains(names, n) {
			t.Errorf("%s outside the queue dir was removed", filepath.Join(o.Dir, n))
		}
	}
}

// tfWarned reports whether a warning or error line of stderr names needle.
func tfWarned(stderr, needle string) bool {
	for _, l := range strings.Split(stderr, "\n") {
		if !strings.Contains(l, needle) {
			continue
		}
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) != nil {
			return true // not a log line: an error gpu-hold printed
		}
		if lv := m["level"]; lv == "warn" || lv == "error" {
			return true
		}
	}
	return false
}

// tfRequireWarned fails the test unless some hold's stderr warns naming
// one of the needles.
func tfRequireWarned(t *testing.T, what string, rs []result, needles ...string) {
	t.Helper()
	for _, r := range rs {
		for _, n := range needles {
			if tfWarned(r.Stderr, n) {
				return
			}
		}
	}
	var all []string
	for _, r := range rs {
		all = append(all, r.Stderr)
	}
	t.Errorf("%s is not reported: no warning names %q\nstderr:\n%s", what, needles, strings.Join(all, "\n---\n"))
}

// tfTicket returns the ticket the hold's "waiting for the token" line
// names, read as an exact integer (a float64 loses digits of a huge seq).
func tfTicket(stderr string) (uint64, bool) {
	for _, l := range strings.Split(stderr, "\n") {
		dec := json.NewDecoder(strings.NewReader(l))
		dec.UseNumber()
		var m map[string]any
		if dec.Decode(&m) != nil {
			continue
		}
		if msg, _ := m["message"].(string); msg != "waiting for the token" {
			continue
		}
		if n, ok := m["ticket"].(json.Number); ok {
			v, err := strconv.ParseUint(n.String(), 10, 64)
			return v, err == nil
		}
	}
	return 0, false
}

// tfAwaitQueued waits until the hold logged its ticket or exited (a zombie
// until we reap it), so that what the test does next comes after its
// enqueue.
func tfAwaitQueued(t *testing.T, s *started, who string) {
	t.Helper()
	deadline := time.Now().Add(tfBound)
	for {
		if strings.Contains(s.Stderr(), "waiting for the token") || zombie(s.Cmd.Process.Pid) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never queued within %v\nstderr:\n%s", who, tfBound, s.Stderr())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// tfGone returns the identity of a process of cred that has exited: the
// holder a forged dead ticket names.
func tfGone(t *testing.T, cred *syscall.Credential, mark string) proc.Ident {
	t.Helper()
	c := exec.Command("sleep", "30")
	c.Env = append(os.Environ(), markEnv+"="+mark)
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cred}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	waitComm(t, c.Process.Pid, "sleep", 5*time.Second)
	id := stat(t, c.Process.Pid).Ident
	c.Process.Kill()
	c.Wait()
	return id
}

// tfForgeDead plants, as uid A, A's own ticket (a valid one: its name, seq,
// resource and uid agree with the file) of a granted holder that is gone,
// whose record field names record. The next hold takes it for a dead
// holder and reaps it, reading (and appending to) that record.
func tfForgeDead(t *testing.T, f *fleet, mark string, seq uint64, holdID, record string, holder proc.Ident) string {
	t.Helper()
	now := time.Now()
	tk := map[string]any{
		"seq": seq, "resource": "gpu", "label": "forged", "holder": holder, "uid": uidA, "host": "h",
		"cmd": []string{"sleep", "300"}, "created": now.Add(-time.Minute), "hold_id": holdID, "record": record,
		"granted": now.Add(-50 * time.Second),
	}
	b, _ := json.Marshal(tk)
	path := filepath.Join(f.Dir, "gpu", fmt.Sprintf("t.%020d", seq))
	tfSh(t, f.A.Cred, mark, fmt.Sprintf("printf '%%s\\n' '%s' > %s.tmp && mv %s.tmp %s", b, path, path, path))
	tfRequirePlanted(t, path, unix.S_IFREG, uidA)
	return path
}

// tfMetricsDir makes a metrics dir as an admin would share one: root's,
// the fleet group's, 03775.
func tfMetricsDir(t *testing.T) string {
	t.Helper()
	return adminDir(t, openDir(t), "metrics")
}

// tfHoldsRefused runs a root hold and a uid B hold, each of which must
// refuse to run (exit 125) before its payload, and returns their results.
func tfHoldsRefused(t *testing.T, f *fleet, mark string, flags []string) []result {
	t.Helper()
	var rs []result
	for _, u := range []struct {
		who string
		rg  rig
	}{{"root", f.Root}, {"uid B", f.B}} {
		ran := filepath.Join(f.Scratch, "ran."+u.rg.Name)
		r := tfStart(t, f, u.rg, mark, flags, "touch", ran).Wait(tfBound)
		if r.Code != 125 || exists(ran) {
			t.Errorf("%s's hold exited %d (payload ran: %v), want 125 before its payload: a hold does not run without a record only its user and root can write\nstderr:\n%s", u.who, r.Code, exists(ran), r.Stderr)
		}
		rs = append(rs, r)
	}
	return rs
}

// tfHoldsOfRootAndB runs a root hold and a uid B hold at once (both queue
// on gpu; each must end within tfBound) and returns their results.
func tfHoldsOfRootAndB(t *testing.T, f *fleet, mark string, flags []string) []result {
	t.Helper()
	r := tfStart(t, f, f.Root, mark, flags, "true")
	// Root's ticket first: root's hold is the one that reaps a forged dead
	// holder of uid A; B's, ahead of it, would wait for uid A to run
	// nothing at all, which other tests beside this one make false.
	tfWaitQueued(t, r)
	b := tfStart(t, f, f.B, mark, flags, "true")
	rs := []result{r.Wait(tfBound), b.Wait(tfBound)}
	for i, who := range []string{"root", "uid B"} {
		if rs[i].Code != 0 {
			t.Errorf("%s's hold exited %d, want 0\nstderr:\n%s", who, rs[i].Code, rs[i].Stderr)
		}
	}
	return rs
}

// tfWaitQueued waits until hold s has taken its ticket, or has ended.
func tfWaitQueued(t *testing.T, s *started) {
	t.Helper()
	for deadline := time.Now().Add(bound(20 * time.Second)); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if e := s.Stderr(); strings.Contains(e, `"ticket":`) || strings.Contains(e, `"exit_code"`) {
			return
		}
	}
	t.Fatalf("harness: root's hold took no ticket within 20s\n%s", s.Stderr())
}

// T3: a FIFO, symlink or hard link planted by uid A where root's and uid
// B's holds open or create a file: resources.json, the record a (forged,
// dead) ticket names, --dump, metrics files.
//
// Catches: os.ReadFile / os.OpenFile on a path in the shared directory
// (a FIFO blocks the hold for ever while it holds the token, or before it
// queues; a symlink writes or creates the file it points at, outside the
// directory; O_CREATE through a dangling symlink creates its target); an
// append to a record with more than one link (A's file elsewhere is
// written as root); a special file skipped silently instead of reported.
func TestPlantedSpecialFiles(t *testing.T) {
	t.Parallel()

	t.Run("fifo-resources.json", func(t *testing.T) {
		t.Parallel()
		f := tfFleet(t)
		mark := newMark(t)
		p := filepath.Join(f.Dir, "resources.json")
		tfSh(t, f.A.Cred, mark, "mkfifo -m 0644 "+p)
		tfRequirePlanted(t, p, unix.S_IFIFO, uidA)
		rs := tfHoldsOfRootAndB(t, f, mark, nil)
		tfRequireWarned(t, "the FIFO at resources.json", rs, p)
		requireNoneLeft(t, mark)
	})

	t.Run("fifo-ticket-record", func(t *testing.T) {
		t.Parallel()
		f := tfFleet(t)
		mark := newMark(t)
		tfWarm(t, f, mark)
		p := filepath.Join(f.Dir, "gpu", "planted.jsonl")
		tfSh(t, f.A.Cred, mark, "mkfifo -m 0664 "+p)
		tfRequirePlanted(t, p, unix.S_IFIFO, uidA)
		tfForgeDead(t, f, mark, 2, "forged-fifo", p, tfGone(t, f.A.Cred, mark))
		// Root's hold takes the token from the "dead holder" and reads its
		// record; B's queues behind it and must get the token too.
		rs := tfHoldsOfRootAndB(t, f, mark, nil)
		tfRequireWarned(t, "the FIFO named as a dead holder's record", rs, p)
		requireNoneLeft(t, mark)
	})

	t.Run("hardlink-ticket-record", func(t *testing.T) {
		t.Parallel()
		f := tfFleet(t)
		mark := newMark(t)
		tfWarm(t, f, mark)
		// A's own file outside the queue dir, holding what looks like the
		// forged holder's record (its header matches the ticket), hard-
		// linked into the resource dir (A may: it is A's own file).
		aDir := openDir(t)
		if err := os.Chown(aDir, uidA, uidA); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(aDir, 0o755); err != nil {
			t.Fatal(err)
		}
		holder := tfGone(t, f.A.Cred, mark)
		hi, _ := json.Marshal(record.HoldInfo{ID: "forged-link", Resource: "gpu", Holder: holder, UID: uidA, Host: "h", Cmd: []string{"sleep", "300"}})
		content := `{"v":1,"type":"hold","hold":` + string(hi) + "}\n"
		own := filepath.Join(aDir, "own.jsonl")
		p := filepath.Join(f.Dir, "gpu", "planted.jsonl")
		tfSh(t, f.A.Cred, mark, fmt.Sprintf("printf '%%s' '%s' > %s && chmod 0664 %s && ln %s %s", content, own, own, own, p))
		if st := tfRequirePlanted(t, p, unix.S_IFREG, uidA); st.Nlink != 2 {
			t.Fatalf("harness: %s has %d links, want 2", p, st.Nlink)
		}
		tfForgeDead(t, f, mark, 2, "forged-link", p, holder)
		rs := tfHoldsOfRootAndB(t, f, mark, nil)
		if b, err := os.ReadFile(own); err != nil || string(b) != content {
			t.Errorf("A's file outside the queue dir, hard-linked as a dead holder's record, was written:\n%s(%v)\nwant:\n%s", b, err, content)
		}
		tfRequireWarned(t, "the hard link named as a dead holder's record", rs, p)
		requireNoneLeft(t, mark)
	})

	// --dump at a FIFO, a symlink, a hard link, and under a symlinked
	// directory, all planted by A inside the shared directory: each hold
	// refuses before its payload (it would have no record), saying what
	// is there, and writes nothing through it.
	for _, tc := range []struct {
		name  string
		plant func(t *testing.T, f *fleet, mark string, o *tfOutside) (dump, planted string)
	}{
		{"fifo-dump", func(t *testing.T, f *fleet, mark string, o *tfOutside) (string, string) {
			p := filepath.Join(f.Dir, "dump.jsonl")
			tfSh(t, f.A.Cred, mark, "mkfifo -m 0666 "+p)
			tfRequirePlanted(t, p, unix.S_IFIFO, uidA)
			return p, p
		}},
		{"symlink-dump", func(t *testing.T, f *fleet, mark string, o *tfOutside) (string, string) {
			p := filepath.Join(f.Dir, "dump.jsonl")
			tfSh(t, f.A.Cred, mark, fmt.Sprintf("ln -s %s %s", o.Sentinel, p))
			tfRequirePlanted(t, p, unix.S_IFLNK, uidA)
			return p, p
		}},
		{"dangling-symlink-dump", func(t *testing.T, f *fleet, mark string, o *tfOutside) (string, string) {
			p := filepath.Join(f.Dir, "dump.jsonl")
			tfSh(t, f.A.Cred, mark, fmt.Sprintf("ln -s %s %s", filepath.Join(o.Dir, "created"), p))
			tfRequirePlanted(t, p, unix.S_IFLNK, uidA)
			return p, p
		}},
		{"symlinked-dir-dump", func(t *testing.T, f *fleet, mark string, o *tfOutside) (string, string) {
			// The directory named in --dump is A's symlink to a directory
			// outside: the record must not be created there.
			d := filepath.Join(f.Dir, "dumps")
			tfSh(t, f.A.Cred, mark, fmt.Sprintf("ln -s %s %s", o.Dir, d))
			tfRequirePlanted(t, d, unix.S_IFLNK, uidA)
			return filepath.Join(d, "dump.jsonl"), d
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := tfFleet(t)
			mark := newMark(t)
			o := tfNewOutside(t)
			dump, planted := tc.plant(t, f, mark, o)
			if tc.name == "symlinked-dir-dump" {
				// root's outside dir is 0755: let B's hold be able to
				// follow it too, as a careless one would.
				os.Chmod(o.Dir, 0o777)
			}
			rs := tfHoldsRefused(t, f, mark, []string{"--dump", dump})
			o.check(t)
			tfRequireWarned(t, "the file planted at --dump", rs, planted)
			requireNoneLeft(t, mark)
		})
	}

	// Metrics files: symlinks to the sentinel and to names beside it (an
	// O_CREATE through them creates the target), and FIFOs.
	for _, tc := range []struct {
		name string
		kind uint32
	}{{"symlink-metrics", unix.S_IFLNK}, {"fifo-metrics", unix.S_IFIFO}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := tfFleet(t)
			mark := newMark(t)
			o := tfNewOutside(t)
			mdir := tfMetricsDir(t)
			targets := map[string]string{
				".gpu_hold_gpu.lock":       filepath.Join(o.Dir, "lock"),
				".gpu_hold_gpu.state.json": o.Sentinel,
				"gpu_hold_gpu.prom":        filepath.Join(o.Dir, "prom"),
			}
			var planted []string
			for name, target := range targets {
				p := filepath.Join(mdir, name)
				if tc.kind == unix.S_IFLNK {
					tfSh(t, f.A.Cred, mark, fmt.Sprintf("ln -s %s %s", target, p))
				} else {
					tfSh(t, f.A.Cred, mark, "mkfifo -m 0666 "+p)
				}
				tfRequirePlanted(t, p, tc.kind, uidA)
				planted = append(planted, p)
			}
			rs := tfHoldsOfRootAndB(t, f, mark, []string{"--metrics-dir", mdir})
			o.check(t)
			tfRequireWarned(t, "the files planted in the metrics dir", rs, planted...)
			requireNoneLeft(t, mark)
		})
	}
}

// T3: uid A plants <dir>/gpu/records as a symlink to a directory A owns
// (mode 0777, so that anyone's hold could write there), holding a
// finished, 60-day-old record of its own.
//
// Catches: records created through os.MkdirAll/os.OpenFile on
// <dir>/<res>/records/<id>.jsonl (the record lands in A's directory, where
// A reads or removes it at will); pruning by os.ReadDir of that path
// (root's hold removes A's old record in A's directory); a hold that runs
// with no record at all (one warning) rather than refusing, saying what
// is at records/.
func TestPlantedRecordsSymlink(t *testing.T) {
	t.Parallel()
	f := tfFleet(t)
	mark := newMark(t)
	tfNoRecordsDir(t, f)
	// The warm-up writes its record elsewhere: gpu/ exists, records/ not.
	tfWarm(t, f, mark, "--dump", filepath.Join(t.TempDir(), "warm.jsonl"))
	if _, err := os.Lstat(filepath.Join(f.Dir, "gpu", "records")); err == nil {
		t.Fatal("harness: the warm-up made records/")
	}

	// A finished record to stand as A's old one (made by a private hold).
	old := filepath.Join(openDir(t), "old.jsonl") // A copies it
	if r := newHold(t, "", mark, "--track=proc", "--cgroup=off", "--dump", old, "--", "true").Run(tfBound); r.Code != 0 {
		t.Fatalf("harness: making a finished record: exit %d\n%s", r.Code, r.Stderr)
	}
	oldText, err := os.ReadFile(old)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(old, 0o644); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(openDir(t), "a-records")
	link := filepath.Join(f.Dir, "gpu", "records")
	tfSh(t, f.A.Cred, mark, fmt.Sprintf("mkdir -m 0777 %[1]s && chmod 0777 %[1]s && cp %[2]s %[1]s/old.jsonl && touch -d '60 days ago' %[1]s/old.jsonl && ln -s %[1]s %[3]s", target, old, link))
	tfRequirePlanted(t, link, unix.S_IFLNK, uidA)
	tfRequirePlanted(t, filepath.Join(target, "old.jsonl"), unix.S_IFREG, uidA)

	// Pruning as strict as it gets: keep 1, nothing older than an hour.
	rs := tfHoldsRefused(t, f, mark, []string{"--keep-records", "1", "--record-age", "1h"})
	for i, who := range []string{"root", "uid B"} {
		for _, want := range []string{link, "symlink", fmt.Sprintf("uid %d", uidA)} {
			if !strings.Contains(rs[i].Stderr, want) {
				t.Errorf("%s's refusal does not say %q\nstderr:\n%s", who, want, rs[i].Stderr)
			}
		}
	}
	ents, _ := os.ReadDir(target)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if len(names) != 1 || names[0] != "old.jsonl" {
		t.Errorf("the holds wrote into or pruned A's directory, the target of the planted records/ symlink: it holds %v, want [old.jsonl]", names)
	}
	if b, err := os.ReadFile(filepath.Join(target, "old.jsonl")); err == nil && !bytes.Equal(b, oldText) {
		t.Errorf("A's old record in the symlink's target was changed")
	}
	requireNoneLeft(t, mark)
}

// Rule 6: records/ and a shared --metrics-dir, created by root's hold,
// let the other users' holds write their own: B's and A's holds each leave
// a record in records/ owned by their uid, and each counts in the metrics.
//
// Catches: records/ created by os.MkdirAll under root's umask (0755: B's
// hold runs with no record while its log names the record's path); a
// records/ without the sticky bit (B could remove root's records); the
// metrics lock and state created 0644 by the first hold (every other
// user's metrics are silently dropped); a .prom the next user cannot
// replace in a sticky dir.
func TestRecordsDirSharedByUsers(t *testing.T) {
	t.Parallel()
	t.Run("records", func(t *testing.T) {
		t.Parallel()
		f := tfFleet(t)
		mark := newMark(t)
		tfNoRecordsDir(t, f) // root's hold makes it
		for _, u := range []struct {
			who string
			rg  rig
			uid int
		}{{"root", f.Root, 0}, {"uid B", f.B, uidB}, {"uid A", f.A, uidA}} {
			r := tfRun(t, f, u.rg, mark, nil, "true")
			rec := recordOf(t, r.Stderr)
			if filepath.Dir(rec) != filepath.Join(f.Dir, "gpu", "records") {
				t.Errorf("%s's record %s is not in %s/gpu/records", u.who, rec, f.Dir)
				continue
			}
			var st unix.Stat_t
			if err := unix.Lstat(rec, &st); err != nil {
				t.Errorf("%s's hold ran with no record: its log names %s, which does not exist (%v)\nstderr:\n%s", u.who, rec, err, r.Stderr)
				continue
			}
			if st.Mode&unix.S_IFMT != unix.S_IFREG || int(st.Uid) != u.uid {
				t.Errorf("%s's record %s has mode %o and uid %d, want a regular file of uid %d", u.who, rec, st.Mode, st.Uid, u.uid)
			}
		}
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(f.Dir, "gpu", "records"), &st); err == nil {
			if st.Gid != fleetGID || st.Mode&0o070 != 0o070 || st.Mode&unix.S_ISVTX == 0 {
				t.Errorf("records/ has group %d mode %04o, want group %d, group rwx and sticky", st.Gid, st.Mode&0o7777, fleetGID)
			}
		}
		requireNoneLeft(t, mark)
	})
	t.Run("metrics", func(t *testing.T) {
		t.Parallel()
		f := tfFleet(t)
		mark := newMark(t)
		mdir := tfMetricsDir(t)
		for i, u := range []struct {
			who string
			rg  rig
		}{{"root", f.Root}, {"uid B", f.B}, {"uid A", f.A}} {
			r := tfRun(t, f, u.rg, mark, []string{"--metrics-dir", mdir}, "true")
			fams := readMetrics(t, mdir, "gpu")
			if v := sample(t, fams, "gpu_hold_holds_total", ""); v != float64(i+1) {
				t.Errorf("after %s's hold, holds_total = %v, want %d: its metrics were not written\nstderr:\n%s", u.who, v, i+1, r.Stderr)
			}
		}
		requireNoneLeft(t, mark)
	})
}

// T2: resources.json written by a user. Whether a hold checks a device
// must not be a user's choice: the file counts only when it is root's (or
// the queue dir owner's) and not writable by group or others.
//
// The attack on a fleet is A planting {"gpu":{"devices":[]}} to switch
// off the check of root's holds. The built-in gpu list names /dev/nvidia*
// and the like, which a hermetic test cannot make, so the test turns the
// attack round: the planted file lists a fake device (a file that an
// outside process holds, as in device_test.go) for gpu. Honoured, the file
// makes root's --device-holders=fail hold report the holder and exit 73;
// ignored, gpu keeps its built-in list, which names no node here, and the
// hold exits 0. The control subtest shows that the same file, root's and
// 0644, is honoured (73), so an exit 73 in the others is the planted file
// being believed, not the rig.
//
// Catches: LoadResources by path with no owner or mode check (a user's
// file, or root's group-writable file rewritten by a user, sets root's
// device list); an ignored file not reported.
func TestUntrustedResourcesJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		honored bool
		plant   func(t *testing.T, f *fleet, mark, text string)
	}{
		{"root-owned-control", true, func(t *testing.T, f *fleet, mark, text string) {
			tfSh(t, nil, mark, fmt.Sprintf("umask 022; printf '%%s' '%s' > %s/resources.json", text, f.Dir))
		}},
		{"user-owned", false, func(t *testing.T, f *fleet, mark, text string) {
			tfSh(t, f.A.Cred, mark, fmt.Sprintf("umask 022; printf '%%s' '%s' > %s/resources.json", text, f.Dir))
		}},
		{"group-writable-rewritten", false, func(t *testing.T, f *fleet, mark, text string) {
			// root's file, but 0664 in the setgid dir: the fleet group
			// may write it, and A does.
			tfSh(t, nil, mark, fmt.Sprintf(`printf '%%s' '{"gpu":{"devices":[]}}' > %[1]s/resources.json && chmod 0664 %[1]s/resources.json`, f.Dir))
			tfSh(t, f.A.Cred, mark, fmt.Sprintf("printf '%%s' '%s' > %s/resources.json", text, f.Dir))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := tfFleet(t)
			mark := newMark(t)
			d := t.TempDir()
			dev := fakeDevice(t, d)
			text := `{"gpu":{"devices":["` + dev + `"]}}`
			tc.plant(t, f, mark, text)
			p := filepath.Join(f.Dir, "resources.json")
			if b, err := os.ReadFile(p); err != nil || string(b) != text {
				t.Fatalf("harness: %s holds %q (%v), want %q", p, b, err, text)
			}
			payload, holder := handOff(t, d, dev)
			h := f.Root.start(t, f.Dir, mark, d, append(append([]string{}, tfFlags...), holdArgs(payload, "--device-holders", "fail")...)...)
			o := holder()
			if tc.honored {
				endWhenKept(t, h, o) // fail keeps the token until then
			}
			r := h.Wait(tfBound)
			rb := tfRun(t, f, f.B, mark, []string{"--device-holders", "fail"}, "true")
			if tc.honored {
				requireEnd(t, r, 73, false)
				requireReported(t, r, o, dev)
			} else {
				if r.Code == 73 {
					t.Errorf("root's hold checked the device list of a resources.json root does not vouch for (exit 73: the planted list was believed)\nstderr:\n%s", r.Stderr)
				} else {
					requireEnd(t, r, 0, false)
				}
				tfRequireWarned(t, "the untrusted resources.json", []result{r}, p)
				tfRequireWarned(t, "the untrusted resources.json", []result{rb}, p)
			}
			if !tc.honored {
				requireAlive(t, o)
			}
			requireNoneLeft(t, mark)
		})
	}
}

// T2, T4: poisoned ticket names and a poisoned seq counter. uid A holds
// the token (the gate); uid B's W1 queues behind it; then A plants the
// shape; then root's W2 queues. W1 must run before W2, both exit 0, W2's
// ticket must be above W1's (the counter never wraps or goes back), a
// later hold of A's must still run, and W2 must report the planted file.
//
// Catches: the next seq taken as max(every t.<20 digits>* name)+1 (a
// suffix or 09999999999999999999 makes every hold fail "ticket counter ran
// out"; 18446744073709551615 wraps it to 0, ahead of every waiter); a seq
// file believed however large ("ran out", or a wrap); a user's own valid
// ticket with a huge seq doing the same; junk skipped without a report.
func TestPoisonedNamesAndSeq(t *testing.T) {
	t.Parallel()
	names := func(ns ...string) func(res string) (string, []string) {
		return func(res string) (string, []string) {
			var b strings.Builder
			var planted []string
			for _, n := range ns {
				fmt.Fprintf(&b, "printf 'junk\\n' > %s/%s; ", res, n)
				planted = append(planted, n)
			}
			return b.String(), planted
		}
	}
	seqFile := func(v string) func(res string) (string, []string) {
		return func(res string) (string, []string) {
			return fmt.Sprintf("printf '%s\\n' > %s/seq", v, res), []string{res + "/seq"}
		}
	}
	for _, tc := range []struct {
		name  string
		plant func(res string) (script string, planted []string)
	}{
		{"name-suffix", names("t.09999999999999999999.bak")},
		{"name-max-20-digits", names("t.99999999999999999999")},
		{"name-uint64-max", names("t.18446744073709551615")},
		{"name-leading-zero-huge", names("t.09999999999999999999")},
		{"name-implausible", names("t.00001000000000000000")},
		{"name-garbage", names("t.banana", "t.", "t.-0000000000000000001", "t.1e19", "t.0000000000000000000x")},
		{"own-ticket-huge-seq", nil}, // built below: it needs a holder
		{"seq-huge", seqFile("18446744073709551615")},
		{"seq-near-max", seqFile("09999999999999999999")},
		{"seq-garbage", seqFile("banana")},
		{"seq-zero", seqFile("0")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := tfFleet(t)
			mark := newMark(t)
			tfWarm(t, f, mark)
			res := filepath.Join(f.Dir, "gpu")
			gate := tfStart(t, f, f.A, mark, nil, "bash", "-c", `touch "$GH_T/gate.in"; for i in $(seq 2000); do [ -e "$GH_T/go" ] && exit 0; sleep 0.01; done; exit 9`)
			waitFile(t, filepath.Join(f.Scratch, "gate.in"), tfBound)
			enter := func(label string) []string {
				return []string{"bash", "-c", `date +%s%N > "$GH_T/` + label + `.enter"; sleep 0.05; date +%s%N > "$GH_T/` + label + `.leave"`}
			}
			w1 := tfStart(t, f, f.B, mark, nil, enter("W1")...)
			tfAwaitQueued(t, w1, "W1 (uid B)")

			var script string
			var planted []string
			if tc.plant != nil {
				script, planted = tc.plant(res)
			} else {
				// A's own, valid ticket (name, seq, resource and uid agree)
				// of a waiting holder that is gone, with a huge seq.
				seq := uint64(9999999999999999999)
				tk, _ := json.Marshal(map[string]any{"seq": seq, "resource": "gpu", "holder": tfGone(t, f.A.Cred, mark),
					"uid": uidA, "host": "h", "created": time.Now()})
				n := fmt.Sprintf("t.%020d", seq)
				script, planted = fmt.Sprintf("printf '%%s\\n' '%s' > %s/%s", tk, res, n), []string{n}
			}
			tfSh(t, f.A.Cred, mark, script)
			for _, p := range planted {
				if !strings.HasPrefix(p, "/") {
					p = filepath.Join(res, p)
				}
				if _, err := os.Lstat(p); err != nil {
					t.Fatalf("harness: planted %s is not there: %v", p, err)
				}
			}
			if strings.HasPrefix(tc.name, "seq-") {
				// A (of the fleet group) could really rewrite root's seq.
				b, _ := os.ReadFile(filepath.Join(res, "seq"))
				if want := strings.SplitN(script, "'", 3)[1]; string(b) != strings.ReplaceAll(want, `\n`, "\n") {
					t.Fatalf("harness: seq holds %q after the planting (%s)", b, script)
				}
			}

			w2 := tfStart(t, f, f.Root, mark, nil, enter("W2")...)
			tfAwaitQueued(t, w2, "W2 (root)")
			if err := os.WriteFile(filepath.Join(f.Scratch, "go"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if r := gate.Wait(tfBound); r.Code != 0 {
				t.Errorf("the gate hold (uid A) exited %d\nstderr:\n%s", r.Code, r.Stderr)
			}
			r1, r2 := w1.Wait(tfBound), w2.Wait(tfBound)
			for _, w := range []struct {
				who string
				r   result
			}{{"W1 (uid B, queued before the planting)", r1}, {"W2 (root, queued after it)", r2}} {
				if w.r.Code != 0 {
					t.Errorf("%s exited %d, want 0\nstderr:\n%s", w.who, w.r.Code, w.r.Stderr)
				}
			}
			s1, ok1 := tfTicket(r1.Stderr)
			s2, ok2 := tfTicket(r2.Stderr)
			if ok1 && ok2 && s2 <= s1 {
				t.Errorf("W2 took ticket %d, not above W1's %d: the counter wrapped or went back", s2, s1)
			}
			e1, e2 := tfStamp(f.Scratch, "W1.enter"), tfStamp(f.Scratch, "W2.enter")
			switch {
			case e1 == 0 || e2 == 0:
				t.Errorf("a waiter's payload never ran (W1 entered at %d, W2 at %d)", e1, e2)
			case e2 < e1:
				t.Errorf("W2 (queued after the planting) ran before W1 (queued before it): FIFO order broken (tickets %d, %d)", s1, s2)
			case e2 < tfStamp(f.Scratch, "W1.leave"):
				t.Errorf("W2 entered while W1 was inside")
			}
			var needles []string
			for _, p := range planted {
				if len(p) > len("t.") { // "t." alone is in every ticket name
					needles = append(needles, p)
				}
			}
			tfRequireWarned(t, "the planted "+strings.Join(planted, ", "), []result{r2}, needles...)
			// The queue still hands out tickets afterwards.
			tfRun(t, f, f.A, mark, nil, "true")
			requireNoneLeft(t, mark)
		})
	}
}

// tfStamp reads a `date +%s%N` file (0 when absent).
func tfStamp(dir, name string) int64 {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return 0
	}
	v, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return v
}

// T6: root's payload deletes or replaces the queue's own files while it
// holds the token: its ticket, the token file, seq, or all three. B's W1
// queued before, A's W2 after. Neither may start while root's payload is
// inside; both then run, W1 first, and exit 0.
//
// Catches: a holder known only by its ticket file and the token path (a
// waiter that finds neither takes a fresh token beside the live holder);
// a counter rebuilt from a missing seq that goes back below a waiter's
// ticket; a queue that stalls once its files changed under it.
func TestPlantedPayloadDeletesQueueFiles(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		acts func(res, ticket string) string
	}{
		{"ticket", func(res, ticket string) string { return "rm -f " + ticket }},
		{"token", func(res, ticket string) string { return fmt.Sprintf("rm -f %[1]s/token && : > %[1]s/token", res) }},
		{"seq", func(res, ticket string) string { return fmt.Sprintf("rm -f %[1]s/seq && echo 0 > %[1]s/seq", res) }},
		{"all", func(res, ticket string) string { return fmt.Sprintf("rm -f %[1]s %[2]s/token %[2]s/seq", ticket, res) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := tfFleet(t)
			mark := newMark(t)
			tfWarm(t, f, mark)
			res := filepath.Join(f.Dir, "gpu")
			stamp := func(l string) string { return `date +%s%N > "$GH_T/` + l + `"` }
			h := tfStart(t, f, f.Root, mark, nil, "bash", "-c", stamp("H.enter")+`
for i in $(seq 2000); do [ -e "$GH_T/del" ] && break; sleep 0.01; done
sh -c "$(cat "$GH_T/del")" && touch "$GH_T/deleted"
for i in $(seq 2000); do [ -e "$GH_T/go" ] && break; sleep 0.01; done
`+stamp("H.leave"))
			waitFile(t, filepath.Join(f.Scratch, "H.enter"), tfBound)
			seq, ok := tfTicket(h.Stderr())
			if !ok {
				t.Fatalf("harness: the holder logged no ticket\n%s", h.Stderr())
			}
			ticket := filepath.Join(res, fmt.Sprintf("t.%020d", seq))
			tfRequirePlanted(t, ticket, unix.S_IFREG, 0)
			enter := func(l string) []string {
				return []string{"bash", "-c", stamp(l+".enter") + "; sleep 0.05; " + stamp(l+".leave")}
			}
			w1 := tfStart(t, f, f.B, mark, nil, enter("W1")...)
			tfAwaitQueued(t, w1, "W1 (uid B)")
			if err := os.WriteFile(filepath.Join(f.Scratch, "del"), []byte(tc.acts(res, ticket)), 0o644); err != nil {
				t.Fatal(err)
			}
			waitFile(t, filepath.Join(f.Scratch, "deleted"), tfBound)
			w2 := tfStart(t, f, f.A, mark, nil, enter("W2")...)
			tfAwaitQueued(t, w2, "W2 (uid A)")
			// Root's payload stays inside for a while: nobody may join it.
			for deadline := time.Now().Add(1500 * time.Millisecond); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				if exists(filepath.Join(f.Scratch, "W1.enter")) || exists(filepath.Join(f.Scratch, "W2.enter")) {
					t.Errorf("two holders at once: a waiter's payload started while root's (which deleted %s) was inside", tc.name)
					break
				}
			}
			if err := os.WriteFile(filepath.Join(f.Scratch, "go"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			rh := h.Wait(tfBound)
			t.Logf("the holder whose payload deleted %s exited %d", tc.name, rh.Code)
			r1, r2 := w1.Wait(tfBound), w2.Wait(tfBound)
			for _, w := range []struct {
				who string
				r   result
			}{{"W1 (uid B)", r1}, {"W2 (uid A)", r2}} {
				if w.r.Code != 0 {
					t.Errorf("%s exited %d, want 0: the queue did not keep moving\nstderr:\n%s", w.who, w.r.Code, w.r.Stderr)
				}
			}
			hl, e1, l1, e2 := tfStamp(f.Scratch, "H.leave"), tfStamp(f.Scratch, "W1.enter"), tfStamp(f.Scratch, "W1.leave"), tfStamp(f.Scratch, "W2.enter")
			switch {
			case e1 == 0 || e2 == 0:
				t.Errorf("a waiter's payload never ran (W1 at %d, W2 at %d)", e1, e2)
			case e1 < hl || e2 < hl:
				t.Errorf("two holders at once: a waiter entered before root's payload left (H left %d, W1 entered %d, W2 %d)", hl, e1, e2)
			case e2 < e1:
				t.Errorf("W2 (queued after the deletion) ran before W1: FIFO order broken")
			case e2 < l1:
				t.Errorf("two holders at once: W2 entered while W1 was inside")
			}
			requireNoneLeft(t, mark)
		})
	}
}

// Rule 6: read-only commands with a mistyped resource, as root and as uid
// B: `gpu-hold queue -r TYPO` and `gpu-hold cancel -r TYPO 1` fail with
// one line naming the resource as unknown (and a known one), exit 125, and
// create nothing; `queue -r npu` (known, never used) creates nothing.
//
// Catches: queue.OpenDir creating <dir>/<res>/ for a status read (a typo
// makes a new queue and reports "token free"; a user fills the shared
// directory with resource dirs of its choosing).
func TestReadOnlyCommandsCreateNothing(t *testing.T) {
	t.Parallel()
	f := tfFleet(t)
	mark := newMark(t)
	tfWarm(t, f, mark)
	before := tfList(t, f.Dir)
	for _, u := range []struct {
		who  string
		bin  string
		cred *syscall.Credential
	}{{"root", bin, nil}, {"uid B", f.B.Bin, f.B.Cred}} {
		for _, args := range [][]string{{"queue", "-r", "TYPO"}, {"cancel", "-r", "TYPO", "1"}} {
			t.Run(u.who+" "+strings.Join(args, " "), func(t *testing.T) {
				r := runRaw(t, u.bin, u.cred, mark, f.Scratch, append([]string{"--dir", f.Dir}, args...)...)
				requireOneLineError(t, r, 125, `(?i)(unknown.*TYPO|TYPO.*unknown)`)
				if !regexp.MustCompile(`\bgpu\b`).MatchString(r.Stderr) {
					t.Errorf("the error does not list the known resources (gpu):\n%s", r.Stderr)
				}
				if _, err := os.Lstat(filepath.Join(f.Dir, "TYPO")); err == nil {
					t.Errorf("gpu-hold %s created %s/TYPO", strings.Join(args, " "), f.Dir)
				}
			})
		}
		t.Run(u.who+" queue -r npu", func(t *testing.T) {
			r := runRaw(t, u.bin, u.cred, mark, f.Scratch, "--dir", f.Dir, "queue", "-r", "npu")
			if r.Code != 0 {
				t.Errorf("queue -r npu (a known resource) exited %d\n%s", r.Code, r.Stderr)
			}
		})
		t.Run(u.who+" queue -r gpu", func(t *testing.T) {
			r := runRaw(t, u.bin, u.cred, mark, f.Scratch, "--dir", f.Dir, "queue", "-r", "gpu")
			if r.Code != 0 {
				t.Errorf("queue -r gpu (in use) exited %d\n%s", r.Code, r.Stderr)
			}
		})
	}
	if after := tfList(t, f.Dir); !slices.Equal(before, after) {
		t.Errorf("read-only commands changed the queue dir: before %v, after %v", before, after)
	}
	requireNoneLeft(t, mark)
}

// tfList lists dir's top level.
func tfList(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}
