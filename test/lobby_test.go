// lobby_test.go checks the lobby (issue #23): a hold with two or more live
// tickets ahead of its own waits, after its first 2 s, in gpu-hold-lobby
// rather than as a full gpu-hold; it comes back before its turn and runs
// in queue order, its payload's environment the caller's. A signal, the
// end of the wait allowance and a cancel end a hold in the lobby as they
// end one waiting in gpu-hold. A state handed in by hand makes no hold,
// root's included, adopt (or remove) anyone else's ticket.
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
)

const lobbyComm = "gpu-hold-lobby"

// lobbyAfterTest is how long a hold waits before it may move to the
// lobby (hold's lobbyAfter).
const lobbyAfterTest = 2 * time.Second

// waitQueued waits until s logged that it is waiting for the token.
func waitQueued(t *testing.T, s *started) {
	t.Helper()
	for deadline := time.Now().Add(slowed(20 * time.Second)); !strings.Contains(s.Stderr(), "waiting for the token"); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%v never queued:\n%s", s.Args, s.Stderr())
		}
	}
}

// gatedHolder starts a hold whose payload runs until $GH_T/gate exists.
func gatedHolder(t *testing.T, rg rig, qdir, mark, scratch string) *started {
	t.Helper()
	h := rg.start(t, qdir, mark, scratch, append([]string{"--"}, sh(`echo holder >> $GH_T/order; chmod 666 $GH_T/order; while [ ! -e $GH_T/gate ]; do sleep 0.02; done`)...)...)
	waitFile(t, filepath.Join(scratch, "order"), 20*time.Second)
	return h
}

// waitLobby waits until the hold s waits in the lobby, its signals
// asked for and its queue watched (an inotify fd open).
func waitLobby(t *testing.T, s *started) {
	t.Helper()
	pid := s.Cmd.Process.Pid
	waitComm(t, pid, lobbyComm, slowed(10*time.Second))
	fds := "/proc/" + strconv.Itoa(pid) + "/fd"
	for deadline := time.Now().Add(slowed(10 * time.Second)); ; time.Sleep(5 * time.Millisecond) {
		ents, _ := os.ReadDir(fds)
		for _, e := range ents {
			if l, _ := os.Readlink(filepath.Join(fds, e.Name())); l == "anon_inode:inotify" {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("hold %d in the lobby never watched its queue", pid)
		}
	}
}

// comm is pid's process name ("" when gone).
func comm(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	return strings.TrimSpace(string(b))
}

// envOf reads the environment a payload dumped with `env > FILE`.
func envOf(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			env[k] = v
		}
	}
	return env
}

// Root, uid A and uid B queue behind a holder; the two furthest back wait
// in the lobby, the two nearest the head do not; all run in their turn.
func TestLobbyWaitersKeepTheirTurn(t *testing.T) {
	forBackends(t, true, func(t *testing.T, rg rig) {
		f := newFleet(t, rg.Name)
		mark := newMark(t)
		holder := gatedHolder(t, f.Root, f.Dir, mark, f.Scratch)
		payload := func(name string) []string {
			return append([]string{"--"}, sh(`echo `+name+` >> $GH_T/order; env > $GH_T/env.`+name)...)
		}
		var waiters []*started
		withProcs := f.B
		withProcs.Env = []string{"GOMAXPROCS=3"}
		for _, w := range []struct {
			rg   rig
			name string
		}{{f.A, "a"}, {f.B, "b"}, {withProcs, "c"}, {f.Root, "d"}} {
			s := w.rg.start(t, f.Dir, mark, f.Scratch, payload(w.name)...)
			waitQueued(t, s)
			waiters = append(waiters, s)
		}
		for _, s := range waiters[2:] {
			waitLobby(t, s)
		}
		for _, s := range waiters[:2] {
			if c := comm(s.Cmd.Process.Pid); c != "gpu-hold" {
				t.Errorf("a hold with fewer than two tickets ahead runs %q, want gpu-hold (it would come back on a hand-off)", c)
			}
		}
		os.WriteFile(filepath.Join(f.Scratch, "gate"), nil, 0o644)
		for _, s := range append([]*started{holder}, waiters...) {
			if r := s.Wait(60 * time.Second); r.Code != 0 {
				t.Fatalf("%v exited %d\n%s", s.Args, r.Code, r.Stderr)
			}
		}
		if b, _ := os.ReadFile(filepath.Join(f.Scratch, "order")); string(b) != "holder\na\nb\nc\nd\n" {
			t.Errorf("payloads ran in the order %q, want holder a b c d", b)
		}
		for name, procs := range map[string]string{"c": "3", "d": os.Getenv("GOMAXPROCS")} {
			env := envOf(t, filepath.Join(f.Scratch, "env."+name))
			if env["GOMAXPROCS"] != procs {
				t.Errorf("payload %s has GOMAXPROCS=%q, want the caller's %q", name, env["GOMAXPROCS"], procs)
			}
			for k := range env {
				if strings.HasPrefix(k, "GPU_HOLD_LOBBY") || strings.HasPrefix(k, "GPU_HOLD_RESUME") {
					t.Errorf("payload %s inherited %s", name, k)
				}
			}
		}
		requireNoneLeft(t, mark)
	})
}

// gatedQueue is a procfs holder whose payload runs until its gate opens,
// and two holds queued behind it: a hold queued next has two tickets
// ahead of its own.
type gatedQueue struct {
	rg                  rig
	scratch, qdir, mark string
	holder              *started
	near                []*started
}

func newGatedQueue(t *testing.T) *gatedQueue {
	t.Helper()
	g := &gatedQueue{rg: rigFor("proc"), mark: newMark(t)}
	g.scratch, g.qdir = g.rg.dirs(t)
	g.holder = gatedHolder(t, g.rg, g.qdir, g.mark, g.scratch)
	for range 2 {
		s := g.rg.start(t, g.qdir, g.mark, g.scratch, "--", "true")
		waitQueued(t, s)
		g.near = append(g.near, s)
	}
	return g
}

// open opens the gate: the holder and the two behind it must end well.
func (g *gatedQueue) open(t *testing.T) {
	t.Helper()
	os.WriteFile(filepath.Join(g.scratch, "gate"), nil, 0o644)
	for _, s := range append([]*started{g.holder}, g.near...) {
		if r := s.Wait(30 * time.Second); r.Code != 0 {
			t.Errorf("%v exited %d\n%s", s.Args, r.Code, r.Stderr)
		}
	}
}

// ticketOf is the ticket number a hold logged when it queued.
func ticketOf(t *testing.T, s *started) uint64 {
	t.Helper()
	for _, m := range qLogs(s.Stderr()) {
		if m["message"] == "waiting for the token" {
			if n, ok := m["ticket"].(float64); ok {
				return uint64(n)
			}
		}
	}
	t.Fatalf("%v logged no ticket:\n%s", s.Args, s.Stderr())
	return 0
}

// A hold in the lobby ends on a signal, on SIGUSR1 (gpu-hold cancel's), at
// the end of its -w allowance, and when its ticket is cancelled, with the
// code, message and removed ticket of a hold that waited in gpu-hold.
func TestLobbyEndsAsAWaitingHold(t *testing.T) {
	t.Parallel()
	g := newGatedQueue(t)
	rg, scratch, qdir, mark := g.rg, g.scratch, g.qdir, g.mark
	ends := []struct {
		name string
		args []string
		end  func(s *started)
		code int
		says string
	}{
		{"SIGTERM", nil, func(s *started) { s.Signal(syscall.SIGTERM) }, 143, "got terminated while waiting for the token; ticket "},
		{"SIGUSR1", nil, func(s *started) { s.Signal(syscall.SIGUSR1) }, 77, "got a cancel (SIGUSR1, gpu-hold cancel) while waiting for the token; ticket "},
		{"cancel", nil, func(s *started) {
			if r := qCmd(t, qdir, "cancel", strconv.FormatUint(ticketOf(t, s), 10)); r.Code != 0 {
				t.Errorf("gpu-hold cancel: exit %d\n%s", r.Code, r.Stderr)
			}
		}, 75, "was removed from the gpu queue while waiting"},
		{"-w", []string{"-w", "5s"}, func(*started) {}, 75, "the wait allowance of 5s ran out"},
	}
	far := []*started{}
	for _, e := range ends {
		s := rg.start(t, qdir, mark, scratch, append(e.args, "--", "true")...)
		waitQueued(t, s)
		far = append(far, s)
	}
	for i, e := range ends {
		s := far[i]
		waitLobby(t, s)
		e.end(s)
		r := s.Wait(30 * time.Second)
		if r.Code != e.code || !strings.Contains(r.Stderr, e.says) {
			t.Errorf("%s in the lobby: exit %d, want %d saying %q\n%s", e.name, r.Code, e.code, e.says, r.Stderr)
		}
	}
	if st := qStatus(t, qdir, "gpu"); len(st.Waiters) != 2 {
		t.Errorf("waiters left: %v, want the two near the head alone", st.Waiters)
	}
	g.open(t)
}

// uid B, then root, start gpu-hold with a lobby's state naming uid A's
// waiting ticket and an fd on its file, and a signal (which would remove
// the ticket once adopted): both are refused, and A's hold still runs.
func TestLobbyStateAdoptsNoOnesTicket(t *testing.T) {
	t.Parallel()
	f := newFleet(t, "proc")
	mark := newMark(t)
	holder := gatedHolder(t, f.Root, f.Dir, mark, f.Scratch)
	a := f.A.start(t, f.Dir, mark, f.Scratch, "--", "true")
	waitQueued(t, a)
	seq := ticketOf(t, a)
	ticket := filepath.Join(f.Dir, "gpu", fmt.Sprintf("t.%020d", seq))
	for _, who := range []struct {
		name string
		cred *syscall.Credential
	}{{"uid B", f.B.Cred}, {"root", nil}} {
		file, err := os.Open(ticket)
		if err != nil {
			t.Fatalf("opening uid A's ticket: %v", err)
		}
		state, _ := json.Marshal(map[string]any{"exe": bin, "dir": f.Dir, "resource": "gpu", "ticket": map[string]any{"fd": 3, "seq": seq},
			"hold_id": "forged", "queued": time.Now(), "signals": []int{15}, "signal": 15})
		c := exec.Command(bin, "--dir", f.Dir, "--log-format", "json", "--track=proc", "--", "true")
		c.Env = append(os.Environ(), markEnv+"="+mark, "GPU_HOLD_RESUME="+string(state))
		c.ExtraFiles = []*os.File{file}
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: who.cred}
		out, err := c.CombinedOutput()
		file.Close()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 125 || !strings.Contains(string(out), "not this process's") {
			t.Errorf("%s with a state naming uid A's ticket: %v, want exit 125 refusing it\n%s", who.name, err, out)
		}
		if st := qStatus(t, f.Dir, "gpu"); len(st.Waiters) != 1 || st.Waiters[0].Seq != seq {
			t.Fatalf("after %s's forged state the waiters are %v, want uid A's ticket %d", who.name, st.Waiters, seq)
		}
	}
	os.WriteFile(filepath.Join(f.Scratch, "gate"), nil, 0o644)
	for _, s := range []*started{holder, a} {
		if r := s.Wait(30 * time.Second); r.Code != 0 {
			t.Errorf("%v exited %d\n%s", s.Args, r.Code, r.Stderr)
		}
	}
}

// A hold on a terminal draws its place in the queue: it waits as gpu-hold,
// never in the lobby, however far back it is and however long it waits.
func TestLobbyNotForATerminal(t *testing.T) {
	t.Parallel()
	g := newGatedQueue(t)
	far := startPty(t, g.mark, "--dir", g.qdir, "--track=proc", "--", "true")
	far.waitFor(t, "2 ahead")
	time.Sleep(lobbyAfterTest + time.Second)
	if c := comm(far.cmd.Process.Pid); c != "gpu-hold" {
		t.Errorf("a hold on a terminal waits in %q, want gpu-hold (its status line)", c)
	}
	g.open(t)
	if code := far.wait(t); code != 0 {
		t.Errorf("the hold on a terminal exited %d\n%s", code, far.screen())
	}
}
