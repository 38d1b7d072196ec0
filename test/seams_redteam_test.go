// seams_redteam_test.go owns the red-team pass over issue 44's fixes, with
// real uids: a declared resource whose dir nobody made yet cannot be
// wedged by the first user's hold (or a member's mkdir), and the root reap
// timer makes it; reap -r on a typo makes nothing; wait returns no exit
// code from a record another user planted; doctor reports a settings file
// that does not count.
package test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// rtResources writes the fleet's resources.json as root: tpu, and gpu as
// a pool of two devices (regular files as their nodes).
func rtResources(t *testing.T, f *fleet) {
	t.Helper()
	devdir := openDir(t)
	var devs []string
	for i := range 2 {
		p := filepath.Join(devdir, fmt.Sprintf("dev%d", i))
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		devs = append(devs, fmt.Sprintf(`{"nodes": [%q]}`, p))
	}
	cfg := fmt.Sprintf(`{"tpu": {"devices": []}, "fpga": {"devices": []}, "gpu": {"devices": [], "pool": {"devices": [%s]}}}`, strings.Join(devs, ", "))
	if err := os.WriteFile(filepath.Join(f.Dir, "resources.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
}

// rtRequireAdminDir fails unless path is a directory as an admin makes
// one: root's, the fleet group's, mode 03775.
func rtRequireAdminDir(t *testing.T, path string) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		t.Errorf("%s: %v, want a dir root made", path, err)
		return
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Uid != 0 || st.Gid != fleetGID || st.Mode&0o7777 != 0o3775 {
		t.Errorf("%s: mode %o uid %d gid %d, want a dir, root's, gid %d, 03775", path, st.Mode, st.Uid, st.Gid, fleetGID)
	}
}

// A shared fleet dir where root declared tpu and a two-device gpu pool in
// resources.json but made no dirs: uid A's holds on them are refused
// (exit 125, nothing made, the install -d command and the reap timer
// named), as is a member's mkdir of npu left empty or symlink at fpga;
// root's reap --all
// (the timer) then makes every declared dir, root's, and A's, B's and
// root's holds all run on them.
//
// Catches: the first user's hold making <dir>/tpu/ (or gpu.d0/) as its
// own, after which every other user's hold and root's refuse it ("belongs
// to uid N ... so gpu-hold will not queue in it") and reap --all exits
// 125: a resource wedged by whoever held it first.
func TestRedDeclaredResourceNotWedged(t *testing.T) {
	f := newFleet(t, "proc")
	t.Parallel()
	mark := newMark(t)
	rtResources(t, f)
	for _, res := range []string{"tpu", "gpu"} { // gpu: a pool, -n 1
		r := runRaw(t, bin, f.A.Cred, mark, f.Scratch, "--dir", f.Dir, "--track=proc", "-r", res, "-n", "1", "-w", "20s", "--", "true")
		requireOneLineError(t, r, 125, `install -d -m 3775 -o root -g \S+ `+regexp.QuoteMeta(filepath.Join(f.Dir, res)))
		requireMentions(t, r.Stderr, `reap --all`)
		for _, d := range []string{res, res + ".d0"} {
			if _, err := os.Lstat(filepath.Join(f.Dir, d)); err == nil {
				t.Fatalf("uid A's refused hold on %s made %s", res, filepath.Join(f.Dir, d))
			}
		}
	}
	// A member's mkdir, or symlink to root's dir, at a declared name would
	// wedge it as well.
	tfSh(t, f.B.Cred, mark, "mkdir "+filepath.Join(f.Dir, "npu"))
	tfSh(t, f.B.Cred, mark, "ln -s tpu "+filepath.Join(f.Dir, "fpga"))
	if r := qCmd(t, f.Dir, "reap", "--all"); r.Code != 0 {
		t.Fatalf("root's reap --all: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	for _, d := range []string{"tpu", "gpu", "gpu.d0", "gpu.d1", "npu", "fpga"} {
		rtRequireAdminDir(t, filepath.Join(f.Dir, d))
		rtRequireAdminDir(t, filepath.Join(f.Dir, d, "records"))
	}
	for _, rg := range []rig{f.A, f.B, f.Root} {
		for _, args := range [][]string{{"-r", "tpu"}, {"-n", "1"}, {"-r", "npu"}, {"-r", "fpga"}} {
			r := rg.start(t, f.Dir, mark, f.Scratch, append(args, "-w", "20s", "--", "true")...).Wait(30 * time.Second)
			if r.Code != 0 {
				t.Errorf("%s's hold %v after the reap made the dirs: exit %d\n%s", rg.Name, args, r.Code, r.Stderr)
			}
		}
	}
	requireNoneLeft(t, mark)
}

// `gpu-hold reap -r gpus` (a typo of gpu), as root and as uid A, exits 125
// with "did you mean" and makes no <dir>/gpus.
//
// Catches: reap opening (so making) the queue of whatever -r names; made
// by root, the typo's dir then even counts as declared.
func TestRedReapTypoMakesNothing(t *testing.T) {
	f := newFleet(t, "proc")
	t.Parallel()
	mark := newMark(t)
	declareRes(t, f, "gpu")
	for _, cred := range []*syscall.Credential{nil, f.A.Cred} {
		r := runRaw(t, bin, cred, mark, f.Scratch, "--dir", f.Dir, "reap", "-r", "gpus")
		requireOneLineError(t, r, 125, `resource "gpus" is unknown.*did you mean "gpu"\?`)
		if _, err := os.Lstat(filepath.Join(f.Dir, "gpus")); err == nil {
			t.Fatalf("uid %d's gpu-hold reap -r gpus made %s/gpus", credUID(cred), f.Dir)
		}
	}
	if r := runRaw(t, bin, f.A.Cred, mark, f.Scratch, "--dir", f.Dir, "reap", "-r", "gpu"); r.Code != 0 {
		t.Errorf("uid A's reap -r gpu of a free token: exit %d\n%s", r.Code, r.Stderr)
	}
}

// rtPlantRecord writes, as uid B, a finished record of hold id at path
// whose header names uid as its holder and exit code 42.
func rtPlantRecord(t *testing.T, f *fleet, path, id string, uid int) {
	t.Helper()
	now := time.Now()
	hdr, _ := json.Marshal(map[string]any{"v": 1, "type": "hold", "hold": map[string]any{
		"id": id, "resource": "gpu", "holder": map[string]any{"pid": 1, "start": 1}, "uid": uid,
		"times": map[string]any{"queued": now, "granted": now}, "exit_code": 42}})
	end, _ := json.Marshal(map[string]any{"type": "end", "at": now})
	tfSh(t, f.B.Cred, newMark(t), fmt.Sprintf("umask 022; rm -f %[1]s; printf '%%s\\n%%s\\n' '%[2]s' '%[3]s' > %[1]s", path, hdr, end))
}

// rtWaitPidfd waits until process pid has a pidfd open: `gpu-hold wait`
// has found its hold's ticket and waits on its holder.
func rtWaitPidfd(t *testing.T, pid int) {
	t.Helper()
	fds := fmt.Sprintf("/proc/%d/fd", pid)
	for deadline := time.Now().Add(slowed(20 * time.Second)); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		ents, _ := os.ReadDir(fds)
		for _, e := range ents {
			if l, _ := os.Readlink(filepath.Join(fds, e.Name())); l == "anon_inode:[pidfd]" {
				return
			}
		}
	}
	t.Fatalf("gpu-hold wait (pid %d) never waited on a holder", pid)
}

// uid A's hold waits behind root's; uid B plants, under A's hold id, a
// finished record with exit code 42 at the record's usual name, so A's
// hold writes its own under a fresh name beside it. Root's `gpu-hold wait
// ID`, started while A waits, and again once A's hold has ended, exits
// with A's 3, from A's own record, never 42: whether B's record names
// itself or A as the holder.
//
// Catches: wait's exitOf returning the exit code of whatever file is at
// the record's name, with no look at whose it is.
func TestRedWaitIgnoresPlantedRecord(t *testing.T) {
	f := srFleet(t)
	t.Parallel()
	mark := newMark(t)
	holder := gatedHolder(t, f.Root, f.Dir, mark, f.Scratch)
	a := f.A.start(t, f.Dir, mark, f.Scratch, "-l", "a", "-w", "60s", "--", "sh", "-c", "exit 3")
	waitQueued(t, a)
	var id string
	for _, w := range qStatus(t, f.Dir, "gpu").Waiters {
		if w.Label == "a" {
			id = w.HoldID
		}
	}
	if id == "" {
		t.Fatalf("uid A's waiting hold is not in the queue")
	}
	path := filepath.Join(f.Dir, "gpu", "records", id+".jsonl")
	rtPlantRecord(t, f, path, id, uidB)
	w := rig{Name: "root-wait"}.start(t, f.Dir, mark, f.Scratch, "wait", id)
	rtWaitPidfd(t, w.Cmd.Process.Pid) // waiting on A's hold, whose ticket it found
	os.WriteFile(filepath.Join(f.Scratch, "gate"), nil, 0o644)
	if r := holder.Wait(30 * time.Second); r.Code != 0 {
		t.Fatalf("the gated holder exited %d\n%s", r.Code, r.Stderr)
	}
	if r := a.Wait(30 * time.Second); r.Code != 3 {
		t.Fatalf("uid A's hold exited %d, want its payload's 3\n%s", r.Code, r.Stderr)
	}
	// A's hold found B's file at its record's usual name and wrote its
	// own under a fresh name beside it: wait finds that one, A's.
	r := w.Wait(30 * time.Second)
	if r.Code != 3 {
		t.Errorf("root's wait on A's live hold, B's record naming B at the usual name: exit %d, want A's 3 from A's own record\n%s", r.Code, r.Stderr)
	}
	rtPlantRecord(t, f, path, id, uidA)
	r = runRaw(t, bin, nil, mark, f.Scratch, "--dir", f.Dir, "wait", id)
	if r.Code != 3 {
		t.Errorf("root's wait on A's ended hold, B's record naming A at the usual name: exit %d, want A's 3 from A's own record\n%s", r.Code, r.Stderr)
	}
	// show ID renders the file at the usual name (saying whose it is) and
	// names A's own record beside it.
	if r := qCmd(t, f.Dir, "show", id); !strings.Contains(r.Stderr, "under other names") || !strings.Contains(r.Stderr, id+".") {
		t.Errorf("gpu-hold show %s does not name A's own record under its fresh name: exit %d\n%s%s", id, r.Code, r.Stdout, r.Stderr)
	}
	requireNoneLeft(t, mark)
}

// gpu-hold doctor on a fleet dir whose settings.json uid A wrote names it
// as a problem, with the fix, as it does an untrusted resources.json; a
// root-owned one is no problem.
//
// Catches: a settings file that silently sets nothing (holds only log it).
func TestRedDoctorReportsUntrustedSettings(t *testing.T) {
	f := newFleet(t, "proc")
	t.Parallel()
	mark := newMark(t)
	problems := func() []string {
		t.Helper()
		r := qCmd(t, f.Dir, "doctor", "--json")
		var rep struct {
			QueueDir struct {
				Problems []struct{ Path, Problem, Fix string } `json:"problems"`
			} `json:"queue_dir"`
		}
		if r.Code != 0 || json.Unmarshal([]byte(r.Stdout), &rep) != nil {
			t.Fatalf("gpu-hold doctor --json: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
		}
		var out []string
		for _, p := range rep.QueueDir.Problems {
			if strings.HasSuffix(p.Path, "settings.json") {
				out = append(out, p.Problem+"; fix: "+p.Fix)
			}
		}
		return out
	}
	srSettings(t, f, mark, f.A.Cred, `{"records": {"keep": 1}}`)
	got := problems()
	if len(got) != 1 || !strings.Contains(got[0], fmt.Sprintf("owned by uid %d", uidA)) || !strings.Contains(got[0], "chown root:") {
		t.Errorf("doctor on uid A's settings.json: problems %q, want one that names uid %d and the chown", got, uidA)
	}
	srSettings(t, f, mark, nil, `{"records": {"keep": 1}}`)
	if got := problems(); len(got) != 0 {
		t.Errorf("doctor on root's settings.json: problems %q, want none", got)
	}
}

// Root's settings.json keeps 2 records; uid A has 2; uid B plants 3
// finished records of its own, dated a day ahead. Root's reap --all (the
// timer) leaves A's 2 and B's newest 2.
//
// Catches: the admin's keep counting all users' records together, so
// that any member's many records (planted, or real short holds) push
// every other user's out: evidence any member can have root remove.
func TestRedPlantedRecordsPushNoneOut(t *testing.T) {
	f := srFleet(t)
	t.Parallel()
	mark := newMark(t)
	srHolds(t, f, mark, f.A, f.A)
	srSettings(t, f, mark, nil, `{"records": {"keep": 2}}`)
	recs := filepath.Join(f.Dir, "gpu", "records")
	for i := range 3 {
		id := fmt.Sprintf("20991231T000000-flood%03d", i)
		p := filepath.Join(recs, id+".jsonl")
		rtPlantRecord(t, f, p, id, uidB)
		tfSh(t, f.B.Cred, mark, "touch -d '+1 day' "+p)
	}
	rr := ghRun(t, "reap", "--all", "--dir", f.Dir)
	if rr.Code != 0 {
		t.Errorf("root's reap --all: exit %d\n%s", rr.Code, rr.Stderr)
	}
	srRequire(t, f, "after root's reap under keep 2 and B's 3 planted records", "root 0, A 2, B 2", rr)
}

// uid A's hold waits behind root's; uid B keeps a live ticket of its own,
// ahead of A's, that carries A's hold id. Root's `gpu-hold wait ID` exits
// 125 at once, saying two users' tickets carry the id, rather than wait
// on B's process and then believe B's record.
//
// Catches: wait taking the first ticket that carries the id, whoever's
// (B's, ahead of A's), waiting on B's process and reading B's record.
func TestRedWaitRefusesSharedHoldID(t *testing.T) {
	f := srFleet(t)
	t.Parallel()
	mark := newMark(t)
	srHolds(t, f, mark, f.Root, f.Root, f.Root) // tickets 1-3 used: B's 2 is free
	holder := gatedHolder(t, f.Root, f.Dir, mark, f.Scratch)
	a := f.A.start(t, f.Dir, mark, f.Scratch, "-l", "a", "-w", "60s", "--", "true")
	waitQueued(t, a)
	var id string
	for _, w := range qStatus(t, f.Dir, "gpu").Waiters {
		if w.Label == "a" {
			id = w.HoldID
		}
	}
	// B's shell locks its ticket, writes it naming itself as the holder,
	// and stays alive as sleep (same pid, start time and lock).
	tk := filepath.Join(f.Dir, "gpu", fmt.Sprintf("t.%020d", 2))
	script := fmt.Sprintf(`exec 9>>%[1]q; flock -x 9
s=$(cut -d' ' -f22 /proc/$$/stat)
printf '{"seq":2,"resource":"gpu","holder":{"pid":%%d,"start":%%s},"uid":%[2]d,"host":%[3]q,"cmd":["x"],"created":%[4]q,"hold_id":%[5]q,"record":"/nonexistent"}\n' $$ $s >&9
: > "$GH_T/forged"
exec sleep 300`, tk, uidB, hostname(), time.Now().Format(time.RFC3339Nano), id)
	c := exec.Command("bash", "-c", script)
	c.Env = append(os.Environ(), markEnv+"="+mark, "GH_T="+f.Scratch)
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: f.B.Cred}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	go c.Wait()
	waitFile(t, filepath.Join(f.Scratch, "forged"), 10*time.Second)
	r := runRaw(t, bin, nil, mark, f.Scratch, "--dir", f.Dir, "wait", "--timeout", "5s", id)
	if r.Code != 125 || !strings.Contains(r.Stderr, "tickets of 2 users carry hold id") {
		t.Errorf("root's wait on A's hold id, which B's live ticket carries too: exit %d, want 125 naming two users' tickets\n%s", r.Code, r.Stderr)
	}
	c.Process.Kill() // our own child, not yet reaped: its ticket goes dead
	os.WriteFile(filepath.Join(f.Scratch, "gate"), nil, 0o644)
	for _, s := range []*started{holder, a} {
		if r := s.Wait(30 * time.Second); r.Code != 0 {
			t.Errorf("%v exited %d\n%s", s.Args, r.Code, r.Stderr)
		}
	}
	requireNoneLeft(t, mark)
}
