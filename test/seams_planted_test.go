// seams_planted_test.go owns the multi-user tests of a file planted where a
// hold will create one (issue 44 item 2; ESCAPES T3 with E10/E19): the
// record path a waiting ticket names, records/ before any hold, and a dead
// procfs holder's cgroup, which a successor must find with no record to
// go by.
package test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/record"
	"github.com/gpu-hold/gpu-hold/internal/testenv"
	"github.com/gpu-hold/gpu-hold/queue"
)

// spOrphan is a holder's payload: a setsid'd, double-forked, TERM-ignoring
// orphan that drops the hold's id from its environment (it keeps the
// test's marker), then the payload's root waits. Once the holder is
// SIGKILLed, only the payload's cgroup, or the holder's own record, can
// name the orphan.
const spOrphan = `( setsid env -u GPU_HOLD_ID bash -c 'trap "" TERM; put orphan $$; exec sleep 300' & )
await orphan
put ready 1
exec sleep 300
`

// spStart is tfStart with payload scripts' scratch dir d ($GH_T).
func spStart(t *testing.T, f *fleet, rg rig, mark, d string, flags []string, payload ...string) *started {
	t.Helper()
	args := append(append(append([]string{}, tfFlags...), flags...), "--")
	return rg.start(t, f.Dir, mark, d, append(args, payload...)...)
}

// spGate holds the token of f's gpu queue (root, no cgroup) until its
// returned func is called: the holds started meanwhile wait with their
// tickets in the queue.
func spGate(t *testing.T, f *fleet) func() {
	t.Helper()
	d := openDir(t)
	s := spStart(t, f, f.Root, newMark(t), d, []string{"-l", "gate"}, script(t, d, "gate.sh", "put held 1\nawait open\n")...)
	waitFile(t, filepath.Join(d, "held"), tfBound)
	return func() {
		if err := os.WriteFile(filepath.Join(d, "open"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if r := s.Wait(tfBound); r.Code != 0 {
			t.Errorf("the gate hold exited %d\nstderr:\n%s", r.Code, r.Stderr)
		}
	}
}

// spTicketOf returns the ticket in f's gpu queue whose holder is pid.
func spTicketOf(t *testing.T, f *fleet, pid int) queue.Ticket {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(f.Dir, "gpu", "t.*"))
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			continue
		}
		var tk queue.Ticket
		if json.Unmarshal(b, &tk) == nil && tk.Holder.PID == pid {
			return tk
		}
	}
	t.Fatalf("harness: no ticket of pid %d among %v", pid, names)
	return queue.Ticket{}
}

// spForge plants, as uid B, a record at path that names tk's hold and
// holder (so that only its owner gives it away) and no process or cgroup.
func spForge(t *testing.T, f *fleet, mark string, tk queue.Ticket) {
	t.Helper()
	hi, _ := json.Marshal(record.HoldInfo{ID: tk.HoldID, Resource: "gpu", Holder: tk.Holder, UID: tk.UID, Host: "h", Cmd: []string{"forged"}})
	tfSh(t, f.B.Cred, mark, fmt.Sprintf("printf '%%s\\n' '%s' > %s && chmod 0666 %s", `{"v":1,"type":"hold","hold":`+string(hi)+"}", tk.Record, tk.Record))
	tfRequirePlanted(t, tk.Record, unix.S_IFREG, uidB)
}

// spOwnRecord checks that the hold of uid, whose ticket was tk, ran with
// a record of its own: not the file planted at tk's record path, but a
// regular file of uid's, 0644 with one link, in the root-owned sticky
// records dir, naming the hold; and that uid B can neither rename it
// away nor put another file in its place. It returns the record's path.
func spOwnRecord(t *testing.T, f *fleet, mark string, who string, uid int, tk queue.Ticket, r result) string {
	t.Helper()
	rec := recordOf(t, r.Stderr)
	var st unix.Stat_t
	switch {
	case rec == tk.Record:
		t.Fatalf("%s's hold names as its record %s, the file uid B planted there\nstderr:\n%s", who, rec, r.Stderr)
	case filepath.Dir(rec) != filepath.Dir(tk.Record):
		t.Fatalf("%s's record %s is not in the records dir %s", who, rec, filepath.Dir(tk.Record))
	case unix.Lstat(rec, &st) != nil:
		t.Fatalf("%s's hold ran without a record: %s does not exist\nstderr:\n%s", who, rec, r.Stderr)
	case st.Mode&unix.S_IFMT != unix.S_IFREG || int(st.Uid) != uid || st.Mode&0o7777 != 0o644 || st.Nlink != 1:
		t.Fatalf("%s's record %s has mode %o, uid %d, %d links; want a regular 0644 file of uid %d with one link", who, rec, st.Mode, st.Uid, st.Nlink, uid)
	}
	if doc := showJSON(t, rec); doc.Hold.ID != tk.HoldID {
		t.Errorf("%s's record %s names hold %q, want %q", who, rec, doc.Hold.ID, tk.HoldID)
	}
	if !tfWarned(r.Stderr, tk.Record) {
		t.Errorf("%s's hold does not report the file planted at its record path %s\nstderr:\n%s", who, tk.Record, r.Stderr)
	}
	// B tries to move it away, to put its own file in its place, and to
	// write it.
	for _, sh := range []string{"mv -f %[1]s %[1]s.moved", "mv -f %[2]s %[1]s", "cp %[2]s %[1]s", "printf x >> %[1]s", "rm -f %[1]s"} {
		if out, err := asUser(t, f.B.Cred, mark, "sh", "-c", fmt.Sprintf(sh, rec, tk.Record)); err == nil {
			t.Errorf("uid B could run %q on %s's record: %s", fmt.Sprintf(sh, rec, tk.Record), who, out)
		}
	}
	var after unix.Stat_t
	if err := unix.Lstat(rec, &after); err != nil || after.Ino != st.Ino || after.Size != st.Size || after.Uid != st.Uid {
		t.Errorf("%s's record %s changed under uid B: %v, inode %d->%d, size %d->%d", who, rec, err, st.Ino, after.Ino, st.Size, after.Size)
	}
	return rec
}

// T3: uid B reads the tickets waiting in the queue (anyone may) and makes
// a file at the record path each names, A's and root's, before their turn.
//
// Catches: a hold that runs with no record when its record's name is
// taken (one warning), or that writes into or reads from B's file; a
// record another user can rename away or replace.
func TestPlantedRecordOfWaitingTicket(t *testing.T) {
	t.Parallel()
	f := tfFleet(t)
	mark := newMark(t)
	tfWarm(t, f, mark) // root's records/, 03775
	open := spGate(t, f)
	ha := tfStart(t, f, f.A, mark, []string{"-l", "a"}, "true")
	hr := tfStart(t, f, f.Root, mark, []string{"-l", "root"}, "true")
	tfAwaitQueued(t, ha, "A's hold")
	tfAwaitQueued(t, hr, "root's hold")
	ta, tr := spTicketOf(t, f, ha.Cmd.Process.Pid), spTicketOf(t, f, hr.Cmd.Process.Pid)
	spForge(t, f, mark, ta)
	spForge(t, f, mark, tr)
	open()
	ra, rr := ha.Wait(tfBound), hr.Wait(tfBound)
	for _, c := range []struct {
		who string
		uid int
		tk  queue.Ticket
		r   result
	}{{"uid A", uidA, ta, ra}, {"root", 0, tr, rr}} {
		if c.r.Code != 0 {
			t.Errorf("%s's hold exited %d, want 0 (with a record of its own)\nstderr:\n%s", c.who, c.r.Code, c.r.Stderr)
			continue
		}
		spOwnRecord(t, f, mark, c.who, c.uid, c.tk, c.r)
		if st := tfRequirePlanted(t, c.tk.Record, unix.S_IFREG, uidB); st.Size == 0 {
			t.Errorf("B's planted file at %s was truncated", c.tk.Record)
		}
	}
	requireNoneLeft(t, mark)
}

// T3 with E10: uid B plants the record path of A's waiting ticket; A's
// hold (procfs, no cgroup) records its payload's setsid'd double-forked
// orphan, which dropped the hold's id, and is SIGKILLed. Root's next hold
// must end the orphan before its payload starts: only A's own record,
// under its fresh name, names it.
//
// Catches: a successor that, not believing the planted file, goes by
// nothing (the orphan runs beside the next payload); one that believes it.
func TestPlantedRecordSuccessorFindsOwnRecord(t *testing.T) {
	t.Parallel()
	f := tfFleet(t)
	mark := newMark(t)
	tfWarm(t, f, mark)
	open := spGate(t, f)
	d := openDir(t)
	a := rig{Name: "uidA", Track: []string{"--track=proc", "--cgroup=off"}, Bin: bin, Cred: userCred(uidA)}
	ha := spStart(t, f, a, mark, d, []string{"-l", "dead"}, script(t, d, "a.sh", spOrphan)...)
	tfAwaitQueued(t, ha, "A's hold")
	ta := spTicketOf(t, f, ha.Cmd.Process.Pid)
	spForge(t, f, mark, ta)
	open()
	orphan := readPid(t, filepath.Join(d, "orphan"), tfBound)
	waitFile(t, filepath.Join(d, "ready"), tfBound)
	own, _ := filepath.Glob(strings.TrimSuffix(ta.Record, ".jsonl") + ".*.jsonl")
	if len(own) != 1 {
		t.Fatalf("A's hold made no record of its own beside the planted %s: %v\nstderr:\n%s", ta.Record, own, ha.Stderr())
	}
	waitRecorded(t, own[0], orphan)
	spKill(t, ha, orphan, mark)
	spSuccessor(t, f, mark, orphan, "")
}

// spKill SIGKILLs holder h and checks the shape: the orphan outlived it,
// without the hold's id in its environment.
func spKill(t *testing.T, h *started, orphan int, mark string) {
	t.Helper()
	h.Signal(syscall.SIGKILL)
	if r := h.Wait(tfBound); r.Code != 128+9 {
		t.Fatalf("test shape: the holder exited %d after SIGKILL\nstderr:\n%s", r.Code, r.Stderr)
	}
	if !zombie(orphan) {
		env, _ := proc.ReadFile(orphan, "environ")
		if strings.Contains(string(env), "GPU_HOLD_ID=") {
			t.Fatalf("test shape: the orphan (pid %d) still carries GPU_HOLD_ID", orphan)
		}
		return
	}
	t.Fatalf("test shape: the orphan (pid %d) died with its holder", orphan)
}

// spSuccessor ends the dead holder's lineage with a root hold (via "")
// or `gpu-hold reap --all` (via "reap") and checks that the orphan was
// ended first: the hold's payload saw nothing of mark alive.
func spSuccessor(t *testing.T, f *fleet, mark string, orphan int, via string) {
	t.Helper()
	d := openDir(t)
	if via == "reap" {
		r := ghRun(t, "--dir", f.Dir, "--log-format", "json", "reap", "--all", "-g", "1s", "--survivor-wait", "1s")
		if r.Code != 0 || !strings.Contains(r.Stdout+r.Stderr, "reaped 1 dead holder") {
			t.Errorf("gpu-hold reap --all exited %d, want 0 having reaped 1 dead holder\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
		}
		if !zombie(orphan) {
			t.Errorf("gpu-hold reap --all left the dead holder's orphan (pid %d) running\nstderr:\n%s", orphan, r.Stderr)
		}
	} else {
		r := spStart(t, f, f.Root, newMark(t), d, []string{"-l", "next"}, script(t, d, "next.sh", e10Scan(mark))...).Wait(tfBound)
		if r.Code != 0 {
			t.Errorf("the successor exited %d, want 0\nstderr:\n%s", r.Code, r.Stderr)
		}
		requireAliveScan(t, d)
		if t.Failed() {
			t.Logf("the successor's stderr:\n%s", r.Stderr)
		}
	}
	requireNoneLeft(t, mark)
}

// spDelegated makes a cgroup v2 directory delegated to uid (its dir and
// the files a delegate writes are uid's), as systemd's Delegate= gives a
// user's service one, and returns it open for CLONE_INTO_CGROUP.
func spDelegated(t *testing.T, mark string, uid int) (string, *os.File) {
	t.Helper()
	dir := testCgroup(t, unifiedRoot, mark, nil)
	for _, p := range []string{dir, filepath.Join(dir, "cgroup.procs"), filepath.Join(dir, "cgroup.threads"), filepath.Join(dir, "cgroup.subtree_control")} {
		if err := os.Chown(p, uid, uid); err != nil {
			t.Fatalf("delegating %s to uid %d: %v", p, uid, err)
		}
	}
	fd, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fd.Close() })
	return dir, fd
}

// spStartIn is rig.start with the hold born into cgroup cg (nil: its
// parent's).
func spStartIn(t *testing.T, rg rig, f *fleet, mark, scratch string, cg *os.File, args ...string) *started {
	t.Helper()
	if cg == nil {
		return rg.start(t, f.Dir, mark, scratch, args...)
	}
	h := newHold(t, f.Dir, mark, append(append([]string{}, rg.Track...), args...)...)
	s := &started{hold: h, stdout: tempFile(t, "stdout"), stderr: tempFile(t, "stderr")}
	h.Cmd = exec.Command(rg.Bin, append([]string{"--dir", h.Dir, "--log-format", "json"}, h.Args...)...)
	h.Cmd.Env = append(os.Environ(), markEnv+"="+h.Mark, "GH_T="+scratch)
	h.Cmd.Stdout, h.Cmd.Stderr = s.stdout, s.stderr
	h.Cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: rg.Cred, UseCgroupFD: true, CgroupFD: int(cg.Fd())}
	h.t0 = time.Now()
	if err := h.Cmd.Start(); err != nil {
		t.Fatalf("starting gpu-hold in cgroup %s: %v", cg.Name(), err)
	}
	t.Cleanup(func() {
		if h.Cmd.ProcessState == nil {
			h.Cmd.Process.Kill()
			h.Cmd.Wait()
		}
	})
	return s
}

// spCgroupOf is pid's cgroup v2 directory.
func spCgroupOf(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", fmt.Sprint(pid), "cgroup"))
	for _, l := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			return filepath.Join(unifiedRoot, p)
		}
	}
	t.Fatalf("harness: no cgroup v2 line for pid %d: %q (%v)", pid, b, err)
	return ""
}

// E19 under T3: a procfs holder with a cgroup (root's own; uid A's, in a
// cgroup delegated to A) whose payload left a setsid'd double-forked
// TERM-ignoring orphan without the hold's id is SIGKILLed; its record is
// then gone, and uid B has planted a forged one at the path its ticket
// names. The next hold (root's), and separately `gpu-hold reap --all`,
// must end the orphan, which only the holder's cgroup still holds.
//
// Catches: a successor that finds the dead holder's cgroup only through
// its record: not believing the planted file (rightly), it ends nothing,
// and the orphan runs beside the next payload.
func TestPlantedRecordDeadHolderCgroup(t *testing.T) {
	testenv.NeedRoot(t, "cgroups and holds as several real uids")
	t.Parallel()
	for _, holder := range []string{"root", "uidA"} {
		for _, via := range []string{"hold", "reap"} {
			t.Run(holder+"/"+via, func(t *testing.T) {
				t.Parallel()
				spCgroupOrphan(t, holder, via)
			})
		}
	}
}

func spCgroupOrphan(t *testing.T, holder, via string) {
	f := tfFleet(t)
	mark := newMark(t)
	tfWarm(t, f, mark)
	if !cgroupFS(unifiedRoot, cgroupV2Magic) {
		testenv.Need(t, "no cgroup v2 hierarchy at %s", unifiedRoot)
	}
	rg := rig{Name: holder, Track: []string{"--track=proc", "--cgroup=on"}, Bin: bin}
	var cg *os.File
	parent := unifiedRoot
	if holder != "root" {
		rg.Cred = userCred(uidA)
		parent, cg = spDelegated(t, mark, uidA)
	}
	d := openDir(t)
	h := spStartIn(t, rg, f, mark, d, cg, "-l", "dead", "-g", "1s", "--survivor-wait", "1s", "--", "bash", script(t, d, "dead.sh", spOrphan)[1])
	orphan := readPid(t, filepath.Join(d, "orphan"), tfBound)
	waitFile(t, filepath.Join(d, "ready"), tfBound)
	tk := spTicketOf(t, f, h.Cmd.Process.Pid)
	cgPath := spCgroupOf(t, orphan)
	if filepath.Base(cgPath) != "gpu-hold-"+tk.HoldID || !strings.HasPrefix(cgPath, parent+"/") {
		t.Fatalf("test shape: the orphan is in cgroup %s, not in the holder's gpu-hold-%s under %s\nstderr:\n%s", cgPath, tk.HoldID, parent, h.Stderr())
	}
	spKill(t, h, orphan, mark)
	t.Cleanup(func() { ghRun(t, "--dir", f.Dir, "reap", "--all", "-g", "1s", "--survivor-wait", "1s") })
	// The record is gone (as if it was never made, or someone removed it),
	// and B's forgery stands at the path the ticket names.
	if err := os.Remove(tk.Record); err != nil {
		t.Fatalf("harness: removing the dead holder's record %s: %v", tk.Record, err)
	}
	spForge(t, f, mark, tk)
	spSuccessor(t, f, mark, orphan, via)
	if _, err := os.Lstat(cgPath); err == nil {
		t.Errorf("the dead holder's cgroup %s is still there after its reap", cgPath)
	}
}

// T3: uid B makes <dir>/gpu/records (its own, 0777) before any hold ran.
// Its owner could rename any record in it away and put a forged one in
// its place: A's and root's holds must refuse to run (exit 125), saying
// which directory and what an admin must do, and write nothing there.
//
// Catches: a hold that takes any directory at records/ for its own (it
// runs, its record in B's directory).
func TestPlantedRecordsDir(t *testing.T) {
	t.Parallel()
	f := tfFleet(t)
	mark := newMark(t)
	tfNoRecordsDir(t, f)
	recs := filepath.Join(f.Dir, "gpu", "records")
	tfSh(t, f.B.Cred, mark, fmt.Sprintf("mkdir %[1]s && chmod 0777 %[1]s", recs))
	tfRequirePlanted(t, recs, unix.S_IFDIR, uidB)
	d := openDir(t)
	for _, u := range []struct {
		who string
		rg  rig
	}{{"uid A", f.A}, {"root", f.Root}} {
		ran := filepath.Join(d, strings.ReplaceAll(u.who, " ", "_"))
		r := tfStart(t, f, u.rg, mark, nil, "touch", ran).Wait(tfBound)
		if r.Code != 125 {
			t.Errorf("%s's hold exited %d with records/ uid B's, want 125 (no record only its user and root can write)\nstderr:\n%s", u.who, r.Code, r.Stderr)
		}
		if exists(ran) {
			t.Errorf("%s's payload ran with records/ uid B's", u.who)
		}
		for _, s := range []string{recs, fmt.Sprintf("uid %d", uidB), "rm -r " + recs, "install -d"} {
			if !strings.Contains(r.Stderr, s) {
				t.Errorf("%s's refusal does not say %q\nstderr:\n%s", u.who, s, r.Stderr)
			}
		}
	}
	if ents, _ := os.ReadDir(recs); len(ents) != 0 {
		t.Errorf("the holds wrote into uid B's records/: %v", ents)
	}
	requireNoneLeft(t, mark)
}
