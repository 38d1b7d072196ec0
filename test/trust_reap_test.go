// trust_reap_test.go owns issue 16's multi-user holds: contention of three uids on one fleet dir, and reaps across uids (rule 5).
package test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/cprog"
	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/queue"
)

// sigwho builds cprog's signal logger into a directory every test uid can
// execute from.
func sigwho(t *testing.T) string {
	t.Helper()
	d := openDir(t)
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return cprog.SigWho(t, d)
}

// becomeUser builds cprog's setuid program of E20 into a directory every
// test uid can execute from.
func becomeUser(t *testing.T) string {
	t.Helper()
	d := openDir(t)
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return cprog.BecomeUser(t, d)
}

// Children a dead holder's payload leaves running (each puts its pid in $GH_T/c).
const plainChild = `bash -c 'trap "" TERM; put c $$; exec sleep 300' &`

func sigwhoChild(prog string) string {
	return fmt.Sprintf(`%q "$GH_T/sig.log" "$GH_T/c" &`, prog)
}

// fleetDead is a holder SIGKILLed on a fleet while its payload runs.
type fleetDead struct {
	mark  string
	pid   int    // the gpu-hold process (gone)
	seq   uint64 // its ticket
	uid   int
	child proc.Ident // its TERM-ignoring child, alive
	d     string     // its scratch dir ($GH_T)
}

// killedHolder runs a hold of rg on resource res of f whose payload starts
// child (one of the *Child shapes) and waits; it SIGKILLs the hold once the
// child runs and checks the shape: holder gone, child alive, ticket known.
func killedHolder(t *testing.T, rg rig, f *fleet, res, child string) *fleetDead {
	t.Helper()
	return killedHolderWith(t, rg, f, res, child+"\nawait c\nput ready 1\nwait\n", nil)
}

// killedHolderWith is killedHolder with the payload's whole script (it
// puts its TERM-ignoring child's pid in c, then ready), and lock (nil:
// none) called on the holder's ticket file and the payload's scratch dir
// before the SIGKILL; the func it returns is waited on after it.
func killedHolderWith(t *testing.T, rg rig, f *fleet, res, body string, lock func(ticket, scratch string) (held func())) *fleetDead {
	t.Helper()
	a := sigkilledHolder(t, rg, f, res, body, lock)
	if st := qStatus(t, f.Dir, res); !hasTicket(st.Dead, a.seq) {
		t.Fatalf("gpu-hold queue --json does not list the SIGKILLed holder (ticket %d) as dead (nor may another uid's lock on its ticket keep it alive): %+v", a.seq, st)
	}
	return a
}

// sigkilledHolder is killedHolderWith but the check that the queue lists
// the holder as dead (a pool's status is shaped otherwise).
func sigkilledHolder(t *testing.T, rg rig, f *fleet, res, body string, lock func(ticket, scratch string) (held func())) *fleetDead {
	t.Helper()
	prepRes(t, f, res) // an admin makes <dir>/<res>/; a root hold fills it
	a := &fleetDead{mark: newMark(t), d: openDir(t), uid: 0}
	if rg.Cred != nil {
		a.uid = int(rg.Cred.Uid)
	}
	payload := script(t, a.d, "dead.sh", body)
	h := rg.start(t, f.Dir, a.mark, a.d, "-r", res, "-l", "dead-"+rg.Name, "-g", "1s", "--survivor-wait", "1s", "--", payload[0], payload[1])
	pid := readPid(t, filepath.Join(a.d, "c"), 10*time.Second)
	waitFile(t, filepath.Join(a.d, "ready"), 5*time.Second)
	a.child = stat(t, pid).Ident
	held := func() {}
	if lock != nil {
		tickets, _ := filepath.Glob(filepath.Join(f.Dir, res, "t.*"))
		if len(tickets) != 1 {
			t.Fatalf("test shape: tickets %v on a fresh resource, want the holder's alone", tickets)
		}
		held = lock(tickets[0], a.d)
	}
	h.Signal(syscall.SIGKILL)
	r := h.Wait(10 * time.Second)
	held()
	if r.Code != 128+9 {
		t.Fatalf("test shape: holder of uid %d exited %d after SIGKILL, want 137\nstderr:\n%s", a.uid, r.Code, r.Stderr)
	}
	a.pid = h.Cmd.Process.Pid
	lines := logLines(r.Stderr)
	if i := findLog(lines, "token taken"); i >= 0 {
		v, _ := lines[i].num("ticket")
		a.seq = uint64(v)
	}
	if a.seq == 0 {
		t.Fatalf("test shape: the holder logged no \"token taken\" with its ticket:\n%s", r.Stderr)
	}
	if !zombie(a.pid) {
		t.Fatalf("test shape: the SIGKILLed holder (pid %d) is still alive", a.pid)
	}
	if !proc.Alive(a.child) {
		t.Fatalf("test shape: the dead holder's TERM-ignoring child (pid %d) is not alive", a.child.PID)
	}
	return a
}

func hasTicket(ts []queue.Ticket, seq uint64) bool {
	for _, tk := range ts {
		if tk.Seq == seq {
			return true
		}
	}
	return false
}

// blockedLine finds the one line a successor that cannot end a dead holder
// of uid logs: its message names that uid (uid 0: "uid 0" or "root") and
// `gpu-hold reap`.
func blockedLine(stderr string, uid int) (string, bool) {
	for _, l := range logLines(stderr) {
		m := l.msg()
		if !strings.Contains(m, "gpu-hold reap") {
			continue
		}
		if uid == 0 && (strings.Contains(m, "uid 0") || strings.Contains(m, "root")) ||
			uid != 0 && strings.Contains(m, strconv.Itoa(uid)) {
			return m, true
		}
	}
	return "", false
}

// requireBlocked checks rule 5 on successor s of dead holder a: within a few
// seconds s says whose lineage is alive and that `gpu-hold reap` ends it,
// and for a while after it has neither started its payload (ran) nor marked
// a reaped, and it keeps waiting; a's child is alive throughout.
func requireBlocked(t *testing.T, f *fleet, res string, s *started, a *fleetDead, ran string) {
	t.Helper()
	deadline := time.Now().Add(8 * time.Second)
	for {
		if exists(ran) {
			t.Fatalf("the successor started its payload while the dead holder's (uid %d) TERM-ignoring child was alive=%v; it must not start before that lineage is ended\nstderr:\n%s",
				a.uid, proc.Alive(a.child), s.Stderr())
		}
		if zombie(s.Cmd.Process.Pid) {
			t.Fatalf("the successor exited instead of waiting for the dead holder's (uid %d) lineage to be ended\nstderr:\n%s", a.uid, s.Stderr())
		}
		if _, ok := blockedLine(s.Stderr(), a.uid); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the successor logged no line naming the dead holder's uid %d and `gpu-hold reap` within 8s\nstderr:\n%s", a.uid, s.Stderr())
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(1500 * time.Millisecond) // it keeps waiting, and stays blocked
	if exists(ran) || findLog(logLines(s.Stderr()), "payload started") >= 0 {
		t.Fatalf("the successor started its payload after saying it cannot end the dead holder's lineage\nstderr:\n%s", s.Stderr())
	}
	if zombie(s.Cmd.Process.Pid) {
		t.Fatalf("the successor exited instead of waiting\nstderr:\n%s", s.Stderr())
	}
	if !proc.Alive(a.child) {
		t.Fatalf("test shape: the dead holder's child (pid %d) died while nobody entitled reaped it", a.child.PID)
	}
	if st := qStatus(t, f.Dir, res); !hasTicket(st.Dead, a.seq) {
		t.Fatalf("the successor marked the dead holder (ticket %d, uid %d) reaped though its child is alive: queue --json lists it no more as dead: %+v", a.seq, a.uid, st)
	}
}

// rootReap runs `gpu-hold reap -r res` as root (again, for up to 10s, while
// done() is false: a reap may find the waiter between two steps) and
// returns the last result.
func rootReap(t *testing.T, f *fleet, res string, done func() bool) result {
	t.Helper()
	return rootReapWith(t, f, done, "-r", res)
}

// rootReapWith is rootReap with the resource flags given (-r RES, --all).
func rootReapWith(t *testing.T, f *fleet, done func() bool, scope ...string) result {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := ghRun(t, append(append([]string{"--dir", f.Dir, "--log-format", "json", "reap"}, scope...), "-g", "1s", "--survivor-wait", "1s")...)
		for i := 0; i < 20 && !done(); i++ {
			time.Sleep(50 * time.Millisecond)
		}
		if done() || time.Now().After(deadline) {
			return r
		}
	}
}

var sigLine = regexp.MustCompile(`^sig=(\d+) uid=(\d+) pid=(-?\d+)$`)

// requireSignalledAs checks the signals sigwho logged in d: at least one
// (TERM comes before KILL), every one sent with real uid uid.
func requireSignalledAs(t *testing.T, d string, uid int, who string) {
	t.Helper()
	b, _ := os.ReadFile(filepath.Join(d, "sig.log"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(b) == 0 {
		t.Errorf("%s sent the dead holder's TERM-ignoring child no catchable signal (no TERM before KILL)", who)
		return
	}
	for _, l := range lines {
		m := sigLine.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("sigwho log line %q does not parse", l)
			continue
		}
		if u, _ := strconv.Atoi(m[2]); u != uid {
			t.Errorf("%s signalled the dead holder's child (signal %s from pid %s) with real uid %d; a reap must act with the dead holder's authority, uid %d",
				who, m[1], m[3], u, uid)
		}
	}
}

// Rule 5 and rule 1 across uids (ESCAPES E10 under T5): a SIGKILLed holder
// of each uid, its TERM-ignoring child alive, and a successor of another
// uid.
//
// Catches: a successor that cannot signal the dead holder's lineage (EPERM)
// yet marks it reaped and starts its payload beside it (today's main); one
// that blocks without saying who can end it; one whose -w is not a bound
// while blocked; `gpu-hold reap` by root that does not end a lineage a
// waiter is blocked on, or a waiter that does not notice and start; a root
// reaper that signals a user's lineage as root (a seteuid-only reaper still
// reaches root's processes) instead of with that user's uid.
func TestFleetReapAcrossUsers(t *testing.T) {
	f := newFleet(t, "proc")
	prog := sigwho(t)
	t.Parallel()

	// (a) A's holder dies; B cannot end A's lineage: B blocks; root's
	// `gpu-hold reap` ends it as uid A; then B's payload runs.
	t.Run("A-dead-B-successor-root-reap", func(t *testing.T) {
		t.Parallel()
		res := "xa"
		a := killedHolder(t, f.A, f, res, sigwhoChild(prog))
		blockedUntilRootReaps(t, f, f.B, res, a)
		requireSignalledAs(t, a.d, uidA, "root's gpu-hold reap")
		if st := qStatus(t, f.Dir, res); hasTicket(st.Dead, a.seq) {
			t.Errorf("after root's reap the queue still lists A's ticket %d as dead", a.seq)
		}
	})

	// (b) root's holder dies; A cannot end it: A blocks; root's reap ends it.
	t.Run("root-dead-A-successor-root-reap", func(t *testing.T) {
		t.Parallel()
		res := "xb"
		a := killedHolder(t, f.Root, f, res, plainChild)
		blockedUntilRootReaps(t, f, f.A, res, a)
	})

	// (b2) the same, while A waits on the lock of root's ticket: A holds it
	// from the holder's death on. Catches: a ticket counted live by its
	// lock alone, so that B starts beside root's lineage and root's reap
	// finds nothing dead.
	t.Run("root-dead-ticket-locked-by-A", func(t *testing.T) {
		t.Parallel()
		res := "xe"
		mark := newMark(t)
		var stranger proc.Ident
		a := killedHolderWith(t, f.Root, f, res, plainChild+"\nawait c\nput ready 1\nwait\n", func(ticket, _ string) func() {
			var held string
			stranger, held = strangerLocks(t, f.A, mark, ticket)
			return func() { waitFile(t, held, 10*time.Second) }
		})
		blockedUntilRootReaps(t, f, f.B, res, a)
		requireVictimAlive(t, stranger, "uid A's process that held the dead ticket's lock")
		killMarked(mark)
	})

	// (b3) E20 with a dead holder: the payload's process and a member of
	// a hold of a user that runs nothing else (uidLone) became uid B (a
	// setuid program) before the holder died, so that user runs nothing;
	// B's successor, which may not act as it, must still not start beside
	// them, which the dead holder's record names. Catches: "the user runs
	// nothing" taken for "nothing of its lineage runs".
	t.Run("lone-dead-payload-became-B", func(t *testing.T) {
		t.Parallel()
		res := "xg"
		prog := becomeUser(t)
		lone := rig{Name: "uidLone", Track: []string{"--track=auto"}, Bin: f.A.Bin, Cred: userCred(uidLone)}
		a := killedHolderWith(t, lone, f, res, fmt.Sprintf("%q %d \"$GH_T/c\" &\nawait c\nput ready 1\nexec %q %d \"$GH_T/root\"\n", prog, uidB, prog, uidB), nil)
		root := readPid(t, filepath.Join(a.d, "root"), 10*time.Second)
		for _, pid := range []int{a.child.PID, root} {
			for deadline := time.Now().Add(5 * time.Second); proc.UID(pid) != uidB; time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("test shape: process %d runs as uid %d, want uid B (%d)", pid, proc.UID(pid), uidB)
				}
			}
		}
		markB, d := newMark(t), openDir(t)
		ran := filepath.Join(d, "ran")
		r := f.B.start(t, f.Dir, markB, d, "-r", res, "-l", "b", "-w", "3s", "-g", "1s", "--survivor-wait", "1s", "--", "bash", "-c", `echo 1 > "$GH_T/ran"`).Wait(15 * time.Second)
		if r.Code != 75 || exists(ran) {
			t.Errorf("B's successor exited %d (payload ran: %v) beside the dead holder's payload and member, now of uid B (alive: %v); want 75 without running\nstderr:\n%s",
				r.Code, exists(ran), proc.Alive(a.child), r.Stderr)
		}
		if st := qStatus(t, f.Dir, res); !hasTicket(st.Dead, a.seq) {
			t.Errorf("B's successor marked the dead holder (ticket %d) reaped with its payload alive: %+v", a.seq, st)
		}
		killMarked(a.mark)
		requireNoneLeft(t, markB)
	})

	// (b4) root's payload rewrites its own granted ticket (its user's file)
	// to name, as its holder, a TERM-ignoring process of its own that keeps
	// the ticket locked once its gpu-hold is SIGKILLed. Catches: a granted
	// ticket that is live and names a live process, yet holds no lock of
	// the queue, left alone as "not dead", so that no reap ever starts and
	// the successor runs beside its lineage.
	t.Run("root-payload-rewrites-its-ticket", func(t *testing.T) {
		t.Parallel()
		res := "xh"
		body := fmt.Sprintf(`t=$(grep -l "$GPU_HOLD_ID" %q/t.*)
(trap "" TERM; exec 9<"$t"; flock -x 9; : > "$GH_T/locked"; exec sleep 300) &
l=$!
put c $l
s=$(cut -d' ' -f22 /proc/$l/stat)
new=$(sed "s/\"holder\":{[^}]*}/\"holder\":{\"pid\":$l,\"start\":$s}/" "$t")
echo "$new" > "$t"
put ready 1
wait
`, filepath.Join(f.Dir, res))
		a := killedHolderWith(t, f.Root, f, res, body, func(_, scratch string) func() {
			return func() { waitFile(t, filepath.Join(scratch, "locked"), 10*time.Second) }
		})
		rootSuccessorFindsNone(t, f, res, "r", a.mark)
		requireNoneLeft(t, a.mark)
	})

	// (c) A's holder dies; a root successor ends A's lineage itself (no
	// block), before its payload, signalling with uid A's authority.
	t.Run("A-dead-root-successor", func(t *testing.T) {
		t.Parallel()
		res := "xc"
		a := killedHolder(t, f.A, f, res, sigwhoChild(prog))
		rootSuccessorFindsNone(t, f, res, "r", a.mark)
		requireSignalledAs(t, a.d, uidA, "the root successor")
		requireNoneLeft(t, a.mark)
	})

	// (d) -w bounds the blocked wait: B gives up with 75, A still dead.
	t.Run("A-dead-B-successor-wait-bound", func(t *testing.T) {
		t.Parallel()
		res := "xd"
		a := killedHolder(t, f.A, f, res, plainChild)
		markB, d := newMark(t), openDir(t)
		ran := filepath.Join(d, "ran")
		r := f.B.start(t, f.Dir, markB, d, "-r", res, "-l", "b", "-w", "3s", "-g", "1s", "--survivor-wait", "1s", "--", "bash", "-c", `echo 1 > "$GH_T/ran"`).Wait(15 * time.Second)
		if r.Code != 75 || exists(ran) {
			t.Errorf("B's successor with -w 3s exited %d after %v (payload ran: %v); want 75 without running, the dead holder's (uid %d) child alive=%v\nstderr:\n%s",
				r.Code, r.Elapsed.Round(time.Millisecond), exists(ran), uidA, proc.Alive(a.child), r.Stderr)
		}
		if _, ok := blockedLine(r.Stderr, uidA); !ok {
			t.Errorf("B's successor logged no line naming uid %d and `gpu-hold reap`\nstderr:\n%s", uidA, r.Stderr)
		}
		if !proc.Alive(a.child) {
			t.Errorf("test shape: A's child died though nobody entitled reaped it")
		}
		if st := qStatus(t, f.Dir, res); !hasTicket(st.Dead, a.seq) {
			t.Errorf("after B gave up, queue --json no longer lists A's ticket %d as dead (B marked it reaped?): %+v", a.seq, st)
		}
		requireNoneLeft(t, markB)
	})
}

// Many users on one fleet dir (issue 16 rule 6; ESCAPES T2's metrics):
// root, A, B and root again queue on one resource in that order, gated by
// the first. Each payload logs its enter and leave instants.
//
// Catches: FIFO broken across uids; two payloads inside at once; a second
// user's hold that runs without a record (records/ made 0755 by the first
// hold's umask) or writes it somewhere else; a record not owned by its
// hold's uid; metrics that only the first user writes (a lock file made
// 0644), so the counters do not add up across users.
func TestFleetContention(t *testing.T) {
	f := newFleet(t, "proc")
	t.Parallel()
	res := "fleet"
	prepRes(t, f, res)
	metrics := filepath.Join(openDir(t), "metrics")
	if err := os.Mkdir(metrics, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(metrics, 0, fleetGID); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(metrics, 0o775|os.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	// The payloads' log: in a dir that is not sticky, so every uid may
	// append to the one file (fs.protected_regular).
	logDir := filepath.Join(openDir(t), "log")
	if err := os.Mkdir(logDir, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(logDir, 0o777)
	log := filepath.Join(logDir, "inside.log")
	if err := os.WriteFile(log, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	os.Chmod(log, 0o666)
	gofile := filepath.Join(logDir, "go")

	type member struct {
		label string
		rg    rig
		uid   int
		s     *started
	}
	members := []*member{{label: "r1", rg: f.Root, uid: 0}, {label: "a1", rg: f.A, uid: uidA}, {label: "b1", rg: f.B, uid: uidB}, {label: "r2", rg: f.Root, uid: 0}}
	for i, m := range members {
		gate := ""
		if i == 0 {
			gate = gofile
		}
		m.s = m.rg.start(t, f.Dir, newMark(t), "", append([]string{"-r", res, "-l", m.label, "-w", "30s", "-g", "1s", "--survivor-wait", "1s", "--metrics-dir", metrics, "--"},
			qPayload(log, m.label, gate)...)...)
		if i == 0 {
			qWaitFor(t, f.Dir, res, "r1 holding", qHeldBy("r1"))
		} else {
			want := i
			qWaitFor(t, f.Dir, res, fmt.Sprintf("%d waiters", want), func(st queue.Status) bool { return len(st.Waiters) == want })
		}
	}
	if err := os.WriteFile(gofile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		r := m.s.Wait(30 * time.Second)
		requireEnd(t, r, 0, false)
		rec := ""
		for _, l := range logLines(r.Stderr) {
			if l.msg() == "hold ended" {
				rec = l.str("record")
			}
		}
		want := filepath.Join(f.Dir, res, "records")
		var st syscall.Stat_t
		switch {
		case rec == "":
			t.Errorf("%s (uid %d): \"hold ended\" names no record", m.label, m.uid)
		case filepath.Dir(rec) != want:
			t.Errorf("%s (uid %d): record %s is not in %s", m.label, m.uid, rec, want)
		case syscall.Lstat(rec, &st) != nil:
			t.Errorf("%s (uid %d): its record %s does not exist; the hold ran without one\nstderr:\n%s", m.label, m.uid, rec, r.Stderr)
		case st.Mode&syscall.S_IFMT != syscall.S_IFREG || int(st.Uid) != m.uid:
			t.Errorf("%s (uid %d): its record %s is mode %o of uid %d, want a regular file of uid %d", m.label, m.uid, rec, st.Mode, st.Uid, m.uid)
		}
		for _, l := range logLines(r.Stderr) {
			if strings.Contains(strings.ToLower(l.msg()), "metrics") && l.str("level") != "debug" && l.str("level") != "info" {
				t.Errorf("%s (uid %d) could not write its metrics: %s %v", m.label, m.uid, l.msg(), l["error"])
			}
		}
	}
	// FIFO and exclusion.
	spans, order := qReadLog(t, log)
	if got := strings.Join(order, " "); got != "r1 a1 b1 r2" {
		t.Errorf("payloads entered in order %q, want \"r1 a1 b1 r2\" (the order the tickets were taken)", got)
	}
	for i := 1; i < len(order); i++ {
		prev, cur := spans[order[i-1]], spans[order[i]]
		if prev.leave == 0 || cur.enter < prev.leave {
			t.Errorf("%s entered before %s left: two payloads inside at once", cur.label, prev.label)
		}
	}
	if len(order) != len(members) {
		t.Errorf("%d payloads ran, want %d: %v", len(order), len(members), order)
	}
	// The counters add up across users.
	b, err := os.ReadFile(filepath.Join(metrics, "gpu_hold_"+res+".prom"))
	if err != nil {
		t.Fatalf("no metrics file: %v", err)
	}
	for _, name := range []string{"gpu_hold_holds_total", "gpu_hold_holds_granted_total"} {
		re := regexp.MustCompile(`(?m)^` + name + `\{resource="` + res + `"\} (\S+)$`)
		m := re.FindStringSubmatch(string(b))
		got := "(absent)"
		if m != nil {
			got = m[1]
		}
		if got != strconv.Itoa(len(members)) {
			t.Errorf("metrics: %s = %s, want %d (one per hold: root's, A's and B's)\n%s", name, got, len(members), b)
		}
	}
}

// blockedUntilRootReaps runs a successor as sr behind dead holder a, which
// sr may not end: it must not start its payload (requireBlocked) until
// root's `gpu-hold reap -r res` ended a's child; then it runs and exits 0.
func blockedUntilRootReaps(t *testing.T, f *fleet, sr rig, res string, a *fleetDead) {
	t.Helper()
	mark, d := newMark(t), openDir(t)
	ran := filepath.Join(d, "ran")
	s := sr.start(t, f.Dir, mark, d, "-r", res, "-l", "s", "-w", "30s", "-g", "1s", "--survivor-wait", "1s", "--", "bash", "-c", `echo 1 > "$GH_T/ran"`)
	requireBlocked(t, f, res, s, a, ran)
	r := rootReap(t, f, res, func() bool { return !proc.Alive(a.child) })
	if proc.Alive(a.child) {
		t.Fatalf("root's gpu-hold reap -r %s did not end the dead holder's (uid %d) child (exit %d)\nstdout:\n%s\nstderr:\n%s", res, a.uid, r.Code, r.Stdout, r.Stderr)
	}
	waitFile(t, ran, 10*time.Second)
	requireEnd(t, s.Wait(20*time.Second), 0, false)
	requireNoneLeft(t, a.mark)
	requireNoneLeft(t, mark)
}

// TestReapAllSweepsResources: the timer's sweep, `gpu-hold reap --all` as
// root, ends the dead holders of every resource of the directory, each as
// its own user, beside a successor that waits on one of them; a resource
// with nothing dead is left alone (no ticket taken).
func TestReapAllSweepsResources(t *testing.T) {
	f := newFleet(t, "proc")
	t.Parallel()
	a1 := killedHolder(t, f.A, f, "ya", plainChild)
	a2 := killedHolder(t, f.A, f, "yb", plainChild)
	prepRes(t, f, "yc")
	markB, d := newMark(t), openDir(t)
	ran := filepath.Join(d, "ran")
	b := f.B.start(t, f.Dir, markB, d, "-r", "ya", "-l", "b", "-w", "30s", "-g", "1s", "--survivor-wait", "1s", "--", "bash", "-c", `echo 1 > "$GH_T/ran"`)
	requireBlocked(t, f, "ya", b, a1, ran)
	seqBefore := qSeq(t, f, "yc")
	r := rootReapWith(t, f, func() bool { return !proc.Alive(a1.child) && !proc.Alive(a2.child) }, "--all")
	if proc.Alive(a1.child) || proc.Alive(a2.child) {
		t.Fatalf("root's gpu-hold reap --all left a dead holder's child alive (exit %d)\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
	}
	waitFile(t, ran, 10*time.Second)
	requireEnd(t, b.Wait(20*time.Second), 0, false)
	for res, a := range map[string]*fleetDead{"ya": a1, "yb": a2} {
		if st := qStatus(t, f.Dir, res); hasTicket(st.Dead, a.seq) {
			t.Errorf("after reap --all the queue of %s still lists A's ticket %d as dead", res, a.seq)
		}
		requireNoneLeft(t, a.mark)
	}
	if got := qSeq(t, f, "yc"); got != seqBefore {
		t.Errorf("reap --all took a ticket on yc, where nothing was dead (seq %q, was %q)", got, seqBefore)
	}
	requireNoneLeft(t, markB)
}

// qSeq reads resource res's ticket counter.
func qSeq(t *testing.T, f *fleet, res string) string {
	t.Helper()
	b, _ := os.ReadFile(filepath.Join(f.Dir, res, "seq"))
	return strings.TrimSpace(string(b))
}

// strangerLocks starts, as rg's user, a marked process that opens ticket
// read-only, waits for its LOCK_EX and holds it; it returns the process's
// identity and the file it makes once it holds the lock.
func strangerLocks(t *testing.T, rg rig, mark, ticket string) (proc.Ident, string) {
	t.Helper()
	d := openDir(t)
	if err := os.Chmod(d, 0o777); err != nil {
		t.Fatal(err)
	}
	c := exec.Command("bash", "-c", `exec 9<"$1" && flock -x 9 && : > "$2" && exec sleep 300`, "stranger", ticket, filepath.Join(d, "held"))
	c.Env = append(os.Environ(), markEnv+"="+mark)
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: rg.Cred}
	if err := c.Start(); err != nil {
		t.Fatalf("starting uid %d's locker: %v", rg.Cred.Uid, err)
	}
	go c.Wait()
	t.Cleanup(func() { killMarked(mark) })
	st, err := proc.ReadStat(c.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	return st.Ident, filepath.Join(d, "held")
}

// rootSuccessorFindsNone runs a root hold on res of f behind a dead holder
// whose processes carry deadMark: it must exit 0, and its payload must
// find none of them alive when it starts (the reap came first).
func rootSuccessorFindsNone(t *testing.T, f *fleet, res, label, deadMark string, flags ...string) {
	t.Helper()
	markR, d := newMark(t), openDir(t)
	args := append([]string{"-r", res, "-l", label, "-w", "20s", "-g", "1s", "--survivor-wait", "1s"}, flags...)
	r := f.Root.start(t, f.Dir, markR, d, append(args, "--", "bash", script(t, d, "scan.sh", e10Scan(deadMark))[1])...).Wait(30 * time.Second)
	requireEnd(t, r, 0, false)
	requireAliveScan(t, d)
	requireNoneLeft(t, markR)
}
