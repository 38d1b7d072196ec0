// trust_forge_test.go owns ESCAPES T1 (forged ticket fields) and T2's forged reaped marker on a multi-user fleet dir.
package test

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/testenv"
	"github.com/gpu-hold/gpu-hold/queue"
)

// writeAs writes data to path as cred (the file is cred's own, mode 0644).
func writeAs(t *testing.T, cred *syscall.Credential, path string, data []byte) {
	t.Helper()
	c := exec.Command("sh", "-c", `umask 022; printf '%s' "$1" > "$2"`, "sh", string(data), path)
	c.Env = append(os.Environ(), markEnv+"="+newMark(t))
	c.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("writing %s as uid %d: %v\n%s", path, cred.Uid, err, out)
	}
}

// goneIdent starts a process as cred, takes its identity and lets it exit:
// the (pid, start) of a holder that is gone.
func goneIdent(t *testing.T, cred *syscall.Credential) proc.Ident {
	t.Helper()
	c := exec.Command("cat")
	c.Env = append(os.Environ(), markEnv+"="+newMark(t))
	c.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	in, err := c.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	waitComm(t, c.Process.Pid, "cat", 5*time.Second)
	id := stat(t, c.Process.Pid).Ident
	in.Close()
	c.Wait()
	if proc.Alive(id) {
		t.Fatalf("test shape: process %v did not exit", id)
	}
	return id
}

// prepRes declares res as an admin does and runs a root hold of `true` on
// it: <dir>/<res>/ then has what holds make in it. It returns that hold's
// finished record and its holder.
func prepRes(t *testing.T, f *fleet, res string) (record string, holder proc.Ident) {
	t.Helper()
	declareRes(t, f, res)
	r := f.Root.start(t, f.Dir, newMark(t), "", "-r", res, "-l", "prep", "--", "true").Wait(20 * time.Second)
	if r.Code != 0 {
		t.Fatalf("preparing resource %s: exit %d\n%s", res, r.Code, r.Stderr)
	}
	record = recordOf(t, r.Stderr)
	doc := showJSON(t, record)
	return record, proc.Ident{PID: doc.Hold.Holder.PID, Start: doc.Hold.Holder.Start}
}

// readTicketFile reads the one ticket file in <dir>/<res>/.
func readTicketFile(t *testing.T, f *fleet, res string) (queue.Ticket, string) {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(f.Dir, res, "t.*"))
	if len(names) != 1 {
		t.Fatalf("want one ticket file in %s, got %v", filepath.Join(f.Dir, res), names)
	}
	b, err := os.ReadFile(names[0])
	if err != nil {
		t.Fatal(err)
	}
	var tk queue.Ticket
	if err := json.Unmarshal(b, &tk); err != nil {
		t.Fatalf("ticket %s: %v", names[0], err)
	}
	return tk, names[0]
}

const forgedSeq = 100

// forgeTicket writes, as uid A, ticket forgedSeq in <dir>/<res>/: A's own
// file, "uid" A, granted, its holder gone, naming holdID and record.
func forgeTicket(t *testing.T, f *fleet, res string, holder proc.Ident, holdID, record string) {
	t.Helper()
	now := time.Now().Add(-time.Minute)
	tk := map[string]any{"seq": forgedSeq, "resource": res, "holder": holder, "uid": uidForger, "host": hostname(),
		"cmd": []string{"sleep", "300"}, "created": now, "hold_id": holdID, "record": record, "granted": now.Add(time.Second)}
	b, _ := json.Marshal(tk)
	writeAs(t, userCred(uidForger), filepath.Join(f.Dir, res, fmt.Sprintf("t.%020d", forgedSeq)), append(b, '\n'))
}

func hostname() string { h, _ := os.Hostname(); return h }

// craftRecord writes, as uid A, a record (docs/RECORD.md) whose hold line
// is hdr (id, holder... as the forger chooses) and whose event lines name
// procs: what a forged ticket's "record" points at.
func craftRecord(t *testing.T, hdr map[string]any, procs ...proc.Ident) string {
	t.Helper()
	now := time.Now().Add(-time.Minute)
	hdr["times"] = map[string]any{"queued": now, "granted": now, "payload_start": now}
	var b strings.Builder
	line, _ := json.Marshal(map[string]any{"v": 1, "type": "hold", "hold": hdr})
	b.Write(append(line, '\n'))
	for _, p := range procs {
		st, err := proc.ReadStat(p.PID)
		if err != nil {
			t.Fatal(err)
		}
		line, _ = json.Marshal(map[string]any{"type": "event", "kind": "fork", "time": now, "pid": p.PID, "start": p.Start,
			"ppid": st.PPID, "pgid": st.PGID, "sid": st.SID, "uid": proc.UID(p.PID)})
		b.Write(append(line, '\n'))
	}
	path := filepath.Join(openDir(t), "forged.jsonl")
	writeAs(t, userCred(uidForger), path, []byte(b.String()))
	return path
}

func fakeHoldID() string {
	var r [4]byte
	rand.Read(r[:])
	return time.Now().UTC().Format("20060102T150405") + "-" + hex.EncodeToString(r[:])
}

// forgery is what one forged ticket names, and the check that what it
// names was not touched.
type forgery struct {
	holder         proc.Ident
	holdID, record string
	intact         func(t *testing.T, after string)
}

// forgedRun plants the forger's ticket on a fresh resource, once for a B
// successor and once for a root one, and checks each completes its own
// payload (the queue moves) and leaves what the ticket names intact.
func forgedRun(t *testing.T, f *fleet, name string, build func(t *testing.T, res string) forgery) {
	t.Helper()
	for _, who := range []struct {
		name string
		rg   rig
	}{{"uidB", f.B}, {"root", f.Root}} {
		res := name + "-" + who.name
		prepRes(t, f, res)
		fg := build(t, res)
		if proc.Alive(fg.holder) {
			t.Fatalf("test shape: the forged ticket's holder %v is alive", fg.holder)
		}
		// What the forged record names was born before the forged grant,
		// as a daemon outside any hold is: a successor that may not act
		// as A then knows it is no lineage of A's dead holder.
		time.Sleep(200 * time.Millisecond)
		forgeTicket(t, f, res, fg.holder, fg.holdID, fg.record)
		if st := qStatus(t, f.Dir, res); !hasTicket(st.Dead, forgedSeq) {
			t.Logf("note: queue --json does not list the forger's ticket as a dead holder: %+v", st)
		}
		fg.intact(t, "before "+who.name+"'s successor") // the attack is real: its target lives
		mark, d := newMark(t), openDir(t)
		r := who.rg.start(t, f.Dir, mark, d, "-r", res, "-l", "succ", "-w", "15s", "-g", "1s", "--survivor-wait", "1s", "--", "bash", "-c", `echo 1 > "$GH_T/ran"`).Wait(30 * time.Second)
		if r.Code != 0 || !exists(filepath.Join(d, "ran")) {
			t.Errorf("%s's successor on %s (behind the forger's ticket) exited %d, payload ran: %v; the queue must move\nstderr:\n%s",
				who.name, res, r.Code, exists(filepath.Join(d, "ran")), r.Stderr)
		}
		t.Logf("%s's successor on %s: exit %d after %v", who.name, res, r.Code, r.Elapsed.Round(time.Millisecond))
		requireNoneLeft(t, mark)
		fg.intact(t, "after "+who.name+"'s successor")
	}
}

// liveHold is a root hold that runs until told to stop.
type liveHold struct {
	s             *started
	d             string
	id, record    string
	root, sleeper proc.Ident
	mark          string
}

func startLive(t *testing.T, f *fleet, res string, track ...string) *liveHold {
	t.Helper()
	declareRes(t, f, res)
	l := &liveHold{mark: newMark(t), d: openDir(t)}
	rg := rig{Name: "live", Track: track, Bin: f.Root.Bin}
	l.s = rg.start(t, f.Dir, l.mark, l.d, "-r", res, "-l", "live", "-g", "1s", "--survivor-wait", "1s", "--",
		"bash", script(t, l.d, "live.sh", `sleep 300 & put sleeper $!
put live $$
until [ -e "$GH_T/stop" ]; do sleep 0.05; done
exit 0
`)[1])
	// A test that stops early still lets the hold end itself (its pins go
	// with it) before the harness's cleanup KILLs what is left.
	t.Cleanup(func() {
		if l.s.Cmd.ProcessState != nil {
			return
		}
		os.WriteFile(filepath.Join(l.d, "stop"), nil, 0o644)
		for deadline := time.Now().Add(10 * time.Second); !zombie(l.s.Cmd.Process.Pid) && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for !exists(filepath.Join(l.d, "live")) || !exists(filepath.Join(l.d, "sleeper")) {
		if zombie(l.s.Cmd.Process.Pid) || time.Now().After(deadline) {
			if strings.Contains(l.s.Stderr(), "cgroup") || strings.Contains(l.s.Stderr(), "bpf") {
				testenv.Need(t, "a live root hold with %v cannot run here: %s", track, l.s.Stderr())
			}
			t.Fatalf("the live root hold did not start its payload\nstderr:\n%s", l.s.Stderr())
		}
		time.Sleep(10 * time.Millisecond)
	}
	l.root = stat(t, readPid(t, filepath.Join(l.d, "live"), time.Second)).Ident
	sp := readPid(t, filepath.Join(l.d, "sleeper"), time.Second)
	waitComm(t, sp, "sleep", 5*time.Second)
	l.sleeper = stat(t, sp).Ident
	tk, _ := readTicketFile(t, f, res)
	l.id, l.record = tk.HoldID, tk.Record
	if l.id == "" || l.record == "" {
		t.Fatalf("test shape: the live hold's ticket names no hold id or record: %+v", tk)
	}
	return l
}

// alive checks the live hold's payload still runs.
func (l *liveHold) alive(t *testing.T, what string) {
	t.Helper()
	requireVictimAlive(t, l.root, "the live root hold's payload ("+what+")")
	requireVictimAlive(t, l.sleeper, "the live root hold's sleep ("+what+")")
}

// end stops the live hold; it must end normally.
func (l *liveHold) end(t *testing.T) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(l.d, "stop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := l.s.Wait(20 * time.Second)
	if r.Code != 0 {
		t.Errorf("the live root hold exited %d after the forged tickets were reaped, want 0: it was touched\nstderr:\n%s", r.Code, r.Stderr)
	}
	requireNoneLeft(t, l.mark)
}

// recordCgroup reads the cgroup the (live) record's hold line names.
func recordCgroup(t *testing.T, record string) string {
	t.Helper()
	b, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	cg := ""
	for _, s := range strings.Split(string(b), "\n") {
		var l struct {
			Type string `json:"type"`
			Hold struct {
				Cgroup string `json:"cgroup"`
			} `json:"hold"`
		}
		if json.Unmarshal([]byte(s), &l) == nil && l.Type == "hold" && l.Hold.Cgroup != "" {
			cg = l.Hold.Cgroup
		}
	}
	return cg
}

// ESCAPES T1: uid A writes a ticket of its own (its file, "uid" A, granted,
// a holder that is gone) whose fields name things that are not A's; root's
// and B's next holds on that resource read it as a dead holder.
//
// Catches: a reaper that takes a record as a target list (it KILLs the
// process group of a root daemon the crafted record names as payload and
// pgid; today's main does, and counts ended=0); one that opens the pins of
// any hold id a ticket names (it ends a LIVE root hold on another resource
// and removes its pins); one that appends its reap to, or trusts, a record
// of another user the ticket points at; one that cgroup.kills a cgroup
// because the name matches the ticket's hold id (the live hold's cgroup).
// And a forged ticket must not wedge the queue: each successor completes.
func TestForgedTicketFields(t *testing.T) {
	f := newFleet(t, "proc")
	bpfErr := bpfUsable()
	t.Parallel()

	// (i) the record names a root daemon (setsid, outside any hold) as
	// payload, group leader and live member.
	t.Run("record-names-root-victim", func(t *testing.T) {
		t.Parallel()
		v := victim(t, nil, newMark(t))
		forgedRun(t, f, "t1i", func(t *testing.T, res string) forgery {
			gone := goneIdent(t, userCred(uidForger))
			id := fakeHoldID()
			rec := craftRecord(t, map[string]any{"id": id, "resource": res, "ticket": forgedSeq, "holder": gone, "uid": uidForger,
				"host": hostname(), "cmd": []string{"sleep", "300"}, "backend": "proc", "payload": v, "pgid": v.PID, "sid": v.PID}, v)
			return forgery{holder: gone, holdID: id, record: rec, intact: func(t *testing.T, after string) {
				requireVictimAlive(t, v, "root daemon named by A's forged record ("+after+")")
			}}
		})
	})

	// (ii) the ticket's hold id is that of a live root hold (eBPF, pinned)
	// on another resource.
	t.Run("hold-id-of-live-root-hold", func(t *testing.T) {
		testenv.NeedBPF(t, bpfErr)
		t.Parallel()
		l := startLive(t, f, "t1ii-live", "--track=bpf")
		pins := "/sys/fs/bpf/gpu-hold/" + l.id
		if !exists(pins) {
			t.Fatalf("test shape: the live eBPF hold %s has no pins at %s", l.id, pins)
		}
		forgedRun(t, f, "t1ii", func(t *testing.T, res string) forgery {
			return forgery{holder: goneIdent(t, userCred(uidForger)), holdID: l.id, intact: func(t *testing.T, after string) {
				l.alive(t, after)
				if !exists(pins) {
					t.Errorf("the live root hold's pins %s were removed (%s)", pins, after)
				}
			}}
		})
		l.end(t)
	})

	// (iii) the record is root's: the finished record of a root hold, the
	// ticket copying its hold id and (gone) holder so the header matches.
	t.Run("record-of-root", func(t *testing.T) {
		t.Parallel()
		forgedRun(t, f, "t1iii", func(t *testing.T, res string) forgery {
			rec, holder := prepRes(t, f, res+"-src")
			before, err := os.ReadFile(rec)
			if err != nil {
				t.Fatal(err)
			}
			return forgery{holder: holder, holdID: strings.TrimSuffix(filepath.Base(rec), ".jsonl"), record: rec, intact: func(t *testing.T, after string) {
				now, _ := os.ReadFile(rec)
				if string(now) != string(before) {
					t.Errorf("root's record %s, named by the forger's ticket, was changed (%s): %d bytes before, %d after; appended:\n%s",
						rec, after, len(before), len(now), strings.TrimPrefix(string(now), string(before)))
				}
			}}
		})
	})

	// (iv) the crafted record names the cgroup of a live root hold (procfs
	// tracker, so no pins: the cgroup alone), the ticket its hold id.
	t.Run("cgroup-of-live-root-hold", func(t *testing.T) {
		t.Parallel()
		l := startLive(t, f, "t1iv-live", "--track=proc", "--cgroup=on")
		cg := recordCgroup(t, l.record)
		if cg == "" || !exists(cg) {
			t.Fatalf("test shape: the live hold's record names no cgroup that exists (%q)", cg)
		}
		forgedRun(t, f, "t1iv", func(t *testing.T, res string) forgery {
			gone := goneIdent(t, userCred(uidForger))
			rec := craftRecord(t, map[string]any{"id": l.id, "resource": res, "ticket": forgedSeq, "holder": gone, "uid": uidForger,
				"host": hostname(), "cmd": []string{"sleep", "300"}, "backend": "proc", "cgroup": cg})
			return forgery{holder: gone, holdID: l.id, record: rec, intact: func(t *testing.T, after string) {
				l.alive(t, after)
				if !exists(cg) {
					t.Errorf("the live root hold's cgroup %s is gone (%s)", cg, after)
				}
			}}
		})
		l.end(t)
	})
}

// ESCAPES T2 (a marker counts only from a writer entitled to it): root's
// holder is SIGKILLed leaving a TERM-ignoring child; uid B plants a reaped
// marker (its own file) that matches the dead ticket's seq, holder and
// created time.
//
// Catches: a queue that believes a marker by its content, not its owner:
// the dead root holder vanishes from `gpu-hold queue` ("token free"), the
// next root hold takes the token without reaping and starts its payload
// beside the dead holder's survivor (today's main).
func TestForgedMarker(t *testing.T) {
	f := newFleet(t, "proc")
	t.Parallel()
	res := "t2m"
	a := killedHolder(t, f.Root, f, res, plainChild)
	tk, _ := readTicketFile(t, f, res)
	if tk.Seq != a.seq {
		t.Fatalf("test shape: the ticket file is %d, the dead holder's ticket %d", tk.Seq, a.seq)
	}
	m, _ := json.Marshal(map[string]any{"seq": tk.Seq, "holder": tk.Holder, "created": tk.Created, "reaped_by": uidB, "reaped": time.Now()})
	var rnd [4]byte
	rand.Read(rnd[:])
	mpath := filepath.Join(f.Dir, res, fmt.Sprintf("reaped.%020d.%s", tk.Seq, hex.EncodeToString(rnd[:])))
	writeAs(t, userCred(uidB), mpath, append(m, '\n'))
	var st syscall.Stat_t
	if err := syscall.Lstat(mpath, &st); err != nil || st.Uid != uidB {
		t.Fatalf("test shape: B's marker %s: %v, uid %d", mpath, err, st.Uid)
	}

	if s := qStatus(t, f.Dir, res); !hasTicket(s.Dead, a.seq) {
		t.Errorf("after uid %d planted a reaped marker, queue --json no longer lists the dead root holder (ticket %d): %+v", uidB, a.seq, s)
	}
	if r := qCmd(t, f.Dir, "queue", "-r", res); strings.Contains(r.Stdout, "token free") {
		t.Errorf("after uid %d planted a reaped marker, gpu-hold queue says \"token free\" while the dead root holder's child runs:\n%s", uidB, r.Stdout)
	}
	rootSuccessorFindsNone(t, f, res, "next", a.mark)
	requireNoneLeft(t, a.mark)
}
