// yield_test.go owns the serve keeper's tests against the real binary
// (gpu-hold --yield): a keeper is ended, TERM first with its grace, when a
// job queues, and the job's payload starts only once the keeper's whole
// lineage is gone; --restart queues the keeper again after the job; a
// keeper never starts while a job waits; and another user cannot end a
// hold that does not yield by forging a ticket that says it yields.
package test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/queue"
)

// keeperScript is a serve keeper: it logs "up NS" when it starts, has a
// child that dies at TERM and one that ignores it (the KILL pass ends
// it), and logs "term NS" from its TERM handler.
const keeperScript = `sleep 300 &
bash -c 'trap "" TERM; exec sleep 300' &
trap 'echo "term $(date +%s%N)" >> "$GH_T/keeper.log"; exit 0' TERM
echo "up $(date +%s%N)" >> "$GH_T/keeper.log"
put keeper $$
while :; do sleep 0.05; done
`

// lineageEnv marks the keeper's payload and its descendants (not the
// keeper's gpu-hold process, which carries the test's marker too).
const lineageEnv = "GH_KEEPER_LINEAGE"

// keeperPayload is the keeper's payload, its lineage marked with mark.
func keeperPayload(t *testing.T, d, mark string) []string {
	return append([]string{"env", lineageEnv + "=" + mark}, script(t, d, "keeper.sh", keeperScript)...)
}

// jobScript is a job that logs "enter NS N" (NS: when it started; N: live
// processes of the keeper's lineage it then finds), sleeps, and logs
// "leave NS". The time is taken before the count: the count reads every
// process's environment (in bash, no fork per process), which on a host
// busy with the other tests' trees takes long enough to blur the bound.
func jobScript(keeperMark string, sleep string) string {
	return fmt.Sprintf(`start=$(date +%%s%%N) n=0
for f in /proc/[0-9]*/environ; do
	while IFS= read -r -d '' e; do [[ $e == '%s=%s' ]] && { n=$((n+1)); break; }; done 2>/dev/null < "$f"
done
echo "enter $start $n" >> "$GH_T/job.log"
sleep %s
echo "leave $(date +%%s%%N)" >> "$GH_T/job.log"
`, lineageEnv, keeperMark, sleep)
}

// stamps reads a payload log: for each word, its lines' fields after it.
func stamps(t *testing.T, path string) map[string][][]int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("payload log: %v", err)
	}
	out := map[string][][]int64{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		var v []int64
		for _, s := range f[1:] {
			n, _ := strconv.ParseInt(s, 10, 64)
			v = append(v, n)
		}
		out[f[0]] = append(out[f[0]], v)
	}
	return out
}

// waitLines waits until path has at least n lines starting with word.
func waitLines(t *testing.T, path, word string, n int, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(slowed(limit))
	for {
		b, _ := os.ReadFile(path)
		c := 0
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, word+" ") {
				c++
			}
		}
		if c >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never had %d %q lines within %v:\n%s", path, n, word, limit, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

const yieldGrace = time.Second

// TestYieldEndedByJob: a keeper holds the token; a job queues. The keeper
// is ended (TERM handler run, its TERM-ignoring child KILLed after the
// grace), exits 79 with cause yielded in its record, and the job starts
// only once no process of the keeper's lineage is alive, within the grace
// plus teardown.
//
// Catches: a keeper that is not told (the job waits for ever: the bound
// fails); one that releases before its lineage is gone (the job sees the
// keeper's processes alive); one KILLed at once (no "term" line).
func TestYieldEndedByJob(t *testing.T) {
	forBackends(t, true, func(t *testing.T, rg rig) {
		d, qdir := rg.dirs(t)
		kmark, jmark := newMark(t), newMark(t)
		keeper := rg.start(t, qdir, kmark, d, append([]string{"-l", "keeper", "--yield", "-g", yieldGrace.String(), "--"},
			script(t, d, "keeper.sh", keeperScript)...)...)
		waitFile(t, filepath.Join(d, "keeper"), 10*time.Second)
		queued := time.Now()
		job := rg.start(t, qdir, jmark, d, append([]string{"-l", "job", "--"}, script(t, d, "job.sh", jobScript(kmark, "0"))...)...)
		kr := keeper.Wait(30 * time.Second)
		jr := job.Wait(30 * time.Second)
		if kr.Code != 79 {
			t.Errorf("keeper exited %d, want 79 (yielded)\nstderr:\n%s", kr.Code, kr.Stderr)
		}
		if e, ok := holdEnded(t, kr); !ok || e.Cause != "yielded" {
			t.Errorf("keeper's hold ended line: %+v (found %v), want cause yielded", e, ok)
		}
		if doc := showJSON(t, recordOf(t, kr.Stderr)); doc.Hold.Cause != "yielded" {
			t.Errorf("keeper's record says cause %q, want yielded", doc.Hold.Cause)
		}
		if jr.Code != 0 {
			t.Fatalf("job exited %d\nstderr:\n%s", jr.Code, jr.Stderr)
		}
		ks, js := stamps(t, filepath.Join(d, "keeper.log")), stamps(t, filepath.Join(d, "job.log"))
		if len(ks["term"]) != 1 {
			t.Errorf("the keeper's TERM handler did not run (keeper.log: %v)", ks)
		}
		if len(js["enter"]) != 1 {
			t.Fatalf("job.log: %v", js)
		}
		enter := js["enter"][0]
		if enter[1] != 0 {
			t.Errorf("the job started while %d process(es) of the keeper's lineage were alive", enter[1])
		}
		if len(ks["term"]) == 1 && enter[0] < ks["term"][0][0] {
			t.Errorf("the job started before the keeper got TERM")
		}
		took := time.Duration(enter[0] - queued.UnixNano())
		bound := slowed(yieldGrace + 3*time.Second)
		t.Logf("job queued to job started: %v (grace %v)", took.Round(time.Millisecond), yieldGrace)
		if took > bound {
			t.Errorf("the job waited %v for the keeper, more than its grace plus teardown (%v)", took, bound)
		}
		requireNoneLeft(t, kmark)
		requireNoneLeft(t, jmark)
	})
}

// TestYieldRestart: a keeper with --restart yields to a job, queues again
// at once, starts again only after the job left, and a TERM ends the loop
// (exit 143) with nothing left.
func TestYieldRestart(t *testing.T) {
	t.Parallel()
	rg := rigFor("proc")
	d, qdir := rg.dirs(t)
	kmark, jmark := newMark(t), newMark(t)
	keeper := rg.start(t, qdir, kmark, d, append([]string{"-l", "keeper", "--yield", "--restart", "-g", yieldGrace.String(), "--"},
		keeperPayload(t, d, kmark)...)...)
	waitLines(t, filepath.Join(d, "keeper.log"), "up", 1, 10*time.Second)
	job := rg.start(t, qdir, jmark, d, append([]string{"-l", "job", "--"}, script(t, d, "job.sh", jobScript(kmark, "0.3"))...)...)
	if jr := job.Wait(30 * time.Second); jr.Code != 0 {
		t.Fatalf("job exited %d\nstderr:\n%s", jr.Code, jr.Stderr)
	}
	waitLines(t, filepath.Join(d, "keeper.log"), "up", 2, 10*time.Second)
	ks, js := stamps(t, filepath.Join(d, "keeper.log")), stamps(t, filepath.Join(d, "job.log"))
	if js["enter"][0][1] != 0 {
		t.Errorf("the job started while the keeper's lineage was alive")
	}
	if up2, leave := ks["up"][1][0], js["leave"][0][0]; up2 < leave {
		t.Errorf("the keeper restarted %v before the job left", time.Duration(leave-up2))
	}
	keeper.Signal(syscall.SIGTERM)
	kr := keeper.Wait(30 * time.Second)
	if kr.Code != 143 {
		t.Errorf("keeper loop exited %d after TERM, want 143\nstderr:\n%s", kr.Code, kr.Stderr)
	}
	if !strings.Contains(kr.Stderr, "keeper queues again") {
		t.Errorf("no restart logged:\n%s", kr.Stderr)
	}
	requireNoneLeft(t, kmark)
	requireNoneLeft(t, jmark)
}

// TestYieldNeverStartsWhileJobWaits: a job holds the token; a keeper
// queues, then a second job. When the first job ends, the second (queued
// after the keeper) gets the token, and the keeper starts only after it
// left.
func TestYieldNeverStartsWhileJobWaits(t *testing.T) {
	t.Parallel()
	rg := rigFor("proc")
	d, qdir := rg.dirs(t)
	hmark, kmark, jmark := newMark(t), newMark(t), newMark(t)
	first := rg.start(t, qdir, hmark, d, append([]string{"-l", "first", "--"}, script(t, d, "first.sh", `put first $$
await stop
`)...)...)
	waitFile(t, filepath.Join(d, "first"), 10*time.Second)
	keeper := rg.start(t, qdir, kmark, d, append([]string{"-l", "keeper", "--yield", "-g", yieldGrace.String(), "--"},
		keeperPayload(t, d, kmark)...)...)
	qWaitFor(t, qdir, "gpu", "the keeper waiting", func(st queue.Status) bool { return len(st.Waiters) == 1 })
	job := rg.start(t, qdir, jmark, d, append([]string{"-l", "job", "--"}, script(t, d, "job.sh", jobScript(kmark, "0.5"))...)...)
	qWaitFor(t, qdir, "gpu", "the keeper and the job waiting", func(st queue.Status) bool { return len(st.Waiters) == 2 })
	os.WriteFile(filepath.Join(d, "stop"), nil, 0o644)
	if r := first.Wait(30 * time.Second); r.Code != 0 {
		t.Fatalf("first job exited %d\nstderr:\n%s", r.Code, r.Stderr)
	}
	if jr := job.Wait(30 * time.Second); jr.Code != 0 {
		t.Fatalf("job exited %d\nstderr:\n%s", jr.Code, jr.Stderr)
	}
	waitLines(t, filepath.Join(d, "keeper.log"), "up", 1, 10*time.Second)
	ks, js := stamps(t, filepath.Join(d, "keeper.log")), stamps(t, filepath.Join(d, "job.log"))
	if up, leave := ks["up"][0][0], js["leave"][0][0]; up < leave {
		t.Errorf("the keeper started %v before the job that queued behind it left", time.Duration(leave-up))
	}
	if js["enter"][0][1] != 0 {
		t.Errorf("the job started while the keeper's lineage was alive")
	}
	keeper.Signal(syscall.SIGTERM)
	if kr := keeper.Wait(30 * time.Second); kr.Code != 143 {
		t.Errorf("keeper exited %d after TERM, want 143\nstderr:\n%s", kr.Code, kr.Stderr)
	}
	for _, m := range []string{hmark, kmark, jmark} {
		requireNoneLeft(t, m)
	}
}

// TestYieldForgedByOtherUser: uid A holds the token with a hold that does
// not yield. uid B plants a ticket of its own that copies A's, says it
// yields, and names A's gpu-hold as its holder (kept locked by B, so it
// counts as live, and placed before A's so that it is the first granted
// ticket a reader finds), then queues a real job. A's hold must run its
// payload to its end (exit 0), and B's job start after it.
//
// Catches: a holder that takes its yielding from the directory's view of
// the holder (the forged ticket) instead of its own ticket.
func TestYieldForgedByOtherUser(t *testing.T) {
	f := newFleet(t, "proc")
	res := "yieldforge"
	prepRes(t, f, res)
	amark, bmark := newMark(t), newMark(t)
	d := f.Scratch
	a := f.A.start(t, f.Dir, amark, d, "-r", res, "-l", "a-job", "-g", "1s", "--", "bash", "-c",
		`echo "up $(date +%s%N)" >> "$GH_T/a.log"; sleep 2; echo "done $(date +%s%N)" >> "$GH_T/a.log"`)
	waitLines(t, filepath.Join(d, "a.log"), "up", 1, 10*time.Second)
	tk, _ := readTicketFile(t, f, res)
	if tk.Yield || tk.UID != uidA {
		t.Fatalf("test shape: A's ticket %+v", tk)
	}
	forged := tk
	forged.Seq, forged.UID, forged.Yield = tk.Seq-1, uidB, true
	b, _ := json.Marshal(forged)
	path := filepath.Join(f.Dir, res, fmt.Sprintf("t.%020d", forged.Seq))
	writeAs(t, f.B.Cred, path, append(b, '\n'))
	locker := lockAs(t, f.B.Cred, bmark, path)
	defer func() { locker.Process.Kill(); locker.Wait() }()
	job := f.B.start(t, f.Dir, bmark, d, "-r", res, "-l", "b-job", "--", "bash", "-c",
		`echo "enter $(date +%s%N)" >> "$GH_T/b.log"`)
	ar := a.Wait(30 * time.Second)
	br := job.Wait(30 * time.Second)
	if ar.Code != 0 {
		t.Errorf("A's hold, which does not yield, exited %d (79: it yielded to B's forged ticket)\nstderr:\n%s", ar.Code, ar.Stderr)
	}
	if e, ok := holdEnded(t, ar); !ok || e.Cause != "exited" {
		t.Errorf("A's hold ended: %+v, want cause exited", e)
	}
	if br.Code != 0 {
		t.Fatalf("B's job exited %d\nstderr:\n%s", br.Code, br.Stderr)
	}
	as, bs := stamps(t, filepath.Join(d, "a.log")), stamps(t, filepath.Join(d, "b.log"))
	if len(as["done"]) != 1 {
		t.Errorf("A's payload did not run to its end: %v", as)
	} else if bs["enter"][0][0] < as["done"][0][0] {
		t.Errorf("B's job started before A's payload was done")
	}
	requireNoneLeft(t, amark)
}

// lockAs holds an exclusive flock on path as cred until killed: what keeps
// a planted ticket "live".
func lockAs(t *testing.T, cred *syscall.Credential, mark, path string) *exec.Cmd {
	t.Helper()
	c := exec.Command("bash", "-c", `exec 9<"$1" && flock -x 9 && exec sleep 300`, "lock", path)
	c.Env = append(os.Environ(), markEnv+"="+mark)
	c.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
	if err := c.Start(); err != nil {
		t.Fatalf("flock as uid %d: %v", cred.Uid, err)
	}
	waitComm(t, c.Process.Pid, "sleep", 5*time.Second)
	return c
}

// TestYieldAcrossUsers: on a fleet directory, uid B's keeper yields to uid
// A's job (the keeper reads A's ticket, a file it does not own, as the
// queue reads every ticket), and A's job runs once B's lineage is gone.
func TestYieldAcrossUsers(t *testing.T) {
	f := newFleet(t, "proc")
	res := "yieldusers"
	prepRes(t, f, res)
	bmark, amark := newMark(t), newMark(t)
	d := f.Scratch
	keeper := f.B.start(t, f.Dir, bmark, d, append([]string{"-r", res, "-l", "b-keeper", "--yield", "-g", "1s", "--"},
		"env", lineageEnv+"="+bmark, "bash", "-c", `trap 'echo "term $(date +%s%N)" >> "$GH_T/bkeeper.log"; exit 0' TERM
echo "up $(date +%s%N)" >> "$GH_T/bkeeper.log"
while :; do sleep 0.05; done`)...)
	waitLines(t, filepath.Join(d, "bkeeper.log"), "up", 1, 10*time.Second)
	job := f.A.start(t, f.Dir, amark, d, append([]string{"-r", res, "-l", "a-job", "--"}, "bash", "-c", jobScript(bmark, "0"))...)
	kr := keeper.Wait(30 * time.Second)
	jr := job.Wait(30 * time.Second)
	if kr.Code != 79 {
		t.Errorf("B's keeper exited %d, want 79 (yielded to A's job)\nstderr:\n%s", kr.Code, kr.Stderr)
	}
	if jr.Code != 0 {
		t.Fatalf("A's job exited %d\nstderr:\n%s", jr.Code, jr.Stderr)
	}
	ks, js := stamps(t, filepath.Join(d, "bkeeper.log")), stamps(t, filepath.Join(d, "job.log"))
	if len(ks["term"]) != 1 {
		t.Errorf("B's keeper's TERM handler did not run: %v", ks)
	}
	if js["enter"][0][1] != 0 {
		t.Errorf("A's job started while %d process(es) of B's keeper were alive", js["enter"][0][1])
	}
	requireNoneLeft(t, bmark)
	requireNoneLeft(t, amark)
}
