// seams_locker_test.go owns ESCAPES T6's queue locks held without a ticket,
// run as real uids: uid B takes the token's flock, or the resource
// directory's, with no ticket (flock(1), marked); uid A's hold waits;
// gpu-hold queue names B's locker (pid, user, command) and A's hold's log
// names it too, never as a token file removed or replaced; once the
// locker exits, A's hold runs. And B's granted ticket of its own writing,
// whose process (not a gpu-hold) holds the token: queue and the waiting
// hold say what that process is.
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
	"github.com/gpu-hold/gpu-hold/internal/testenv"
)

// heldAs starts flock(1) as cred holding path's flock (-o: its command,
// cat, does not inherit the lock), marked with mark, and waits until
// ready says it holds it. The returned func lets go: it closes cat's
// stdin, cat exits, then flock, and it waits for that.
func heldAs(t *testing.T, cred *syscall.Credential, mark, path string, ready func(pid int) bool) (proc.Ident, func()) {
	t.Helper()
	if _, err := exec.LookPath("flock"); err != nil {
		testenv.Need(t, "flock(1) (util-linux) is unavailable here, and it is needed to hold a lock as another user")
	}
	c := exec.Command("flock", "-o", path, "cat")
	c.Env = append(os.Environ(), markEnv+"="+mark)
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cred}
	c.Dir = "/"
	in, err := c.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatalf("starting flock as uid %d: %v", cred.Uid, err)
	}
	done := make(chan struct{})
	go func() { c.Wait(); close(done) }()
	t.Cleanup(func() { in.Close() })
	deadline := time.Now().Add(slowed(20 * time.Second))
	for !ready(c.Process.Pid) {
		if time.Now().After(deadline) {
			t.Fatalf("flock (pid %d) never came to hold %s", c.Process.Pid, path)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return stat(t, c.Process.Pid).Ident, func() {
		t.Helper()
		in.Close()
		select {
		case <-done:
		case <-time.After(slowed(20 * time.Second)):
			t.Fatal("flock did not exit once its command's stdin closed")
		}
	}
}

// locksFile is heldAs's ready: /proc/locks says pid holds path's flock.
func locksFile(t *testing.T, path string) func(pid int) bool {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	key := fmt.Sprintf("%02x:%02x:%d", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
	return func(pid int) bool {
		b, _ := os.ReadFile("/proc/locks")
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 6 && f[1] == "FLOCK" && f[4] == fmt.Sprint(pid) && f[5] == key {
				return true
			}
		}
		return false
	}
}

// qLocker is one of gpu-hold queue --json's lockers.
type qLocker struct {
	Lock    string     `json:"lock"`
	Process proc.Ident `json:"process"`
	UID     int        `json:"uid"`
	User    string     `json:"user"`
	Comm    string     `json:"comm"`
	Cmd     []string   `json:"cmd"`
	Started time.Time  `json:"started"`
	Ticket  uint64     `json:"ticket"`
	Granted bool       `json:"granted"`
}

// qLockerOf is the locker gpu-hold queue --json -r res lists with pid, or nil.
func qLockerOf(t *testing.T, dir, res string, pid int) *qLocker {
	t.Helper()
	r := qCmd(t, dir, "queue", "--json", "-r", res)
	var doc struct {
		Resources []struct {
			Lockers []qLocker `json:"lockers"`
		} `json:"resources"`
	}
	if r.Code != 0 || json.Unmarshal([]byte(r.Stdout), &doc) != nil || len(doc.Resources) != 1 {
		t.Fatalf("gpu-hold queue --json: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	for _, l := range doc.Resources[0].Lockers {
		if l.Process.PID == pid {
			return &l
		}
	}
	return nil
}

// logWith waits for the hold's log to have a line that says s, and
// returns that line's message.
func logWith(t *testing.T, h *started, s string) string {
	t.Helper()
	deadline := time.Now().Add(slowed(30 * time.Second))
	for {
		for _, m := range qLogs(h.Stderr()) {
			if msg, _ := m["message"].(string); strings.Contains(msg, s) {
				return msg
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the hold's log never said %q:\n%s", s, h.Stderr())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// requireSays fails unless text says every one of subs.
func requireSays(t *testing.T, what, text string, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(text, s) {
			t.Errorf("%s does not say %q:\n%s", what, s, text)
		}
	}
}

func TestLockerWithNoTicketIsNamed(t *testing.T) {
	for _, lock := range []string{"token", "directory"} {
		t.Run(lock, func(t *testing.T) {
			f := newFleet(t, "proc")
			prepRes(t, f, "gpu")
			path := filepath.Join(f.Dir, "gpu")
			if lock == "token" {
				path = filepath.Join(path, "token")
			}
			if r := qCmd(t, f.Dir, "queue", "-r", "gpu"); !strings.Contains(r.Stdout, "token free") {
				t.Fatalf("before the lock: %s%s", r.Stdout, r.Stderr)
			}
			id, release := heldAs(t, userCred(uidB), newMark(t), path, locksFile(t, path))
			who := fmt.Sprintf("pid %d (uid %d: flock -o %s cat", id.PID, uidB, path)

			r := qCmd(t, f.Dir, "queue", "-r", "gpu")
			if strings.Contains(r.Stdout, "token free") {
				t.Errorf("gpu-hold queue says the token is free while uid %d holds its %s lock:\n%s", uidB, lock, r.Stdout)
			}
			requireSays(t, "gpu-hold queue", r.Stdout, who, "holds no ticket")
			l := qLockerOf(t, f.Dir, "gpu", id.PID)
			if l == nil {
				t.Errorf("gpu-hold queue --json lists no locker with pid %d", id.PID)
			} else if l.Lock != lock || l.Process != id || l.UID != uidB || l.User != fmt.Sprint(uidB) || len(l.Cmd) == 0 || l.Cmd[0] != "flock" || l.Started.IsZero() || l.Ticket != 0 {
				t.Errorf("gpu-hold queue --json's locker %+v, want flock %v of uid %d on the %s lock, with no ticket", l, id, uidB, lock)
			}

			mark := newMark(t)
			h := f.A.start(t, f.Dir, mark, f.Scratch, "-l", "alpha", "--", "true")
			msg := logWith(t, h, fmt.Sprintf("pid %d", id.PID))
			requireSays(t, "uid A's waiting hold's log", msg, who, "holds no ticket", "cancel -r gpu")
			if strings.Contains(h.Stderr(), "removed or replaced") {
				t.Errorf("uid A's hold blames a token file removed or replaced:\n%s", h.Stderr())
			}
			r = qCmd(t, f.Dir, "queue", "-r", "gpu")
			requireSays(t, "gpu-hold queue, uid A waiting", r.Stdout, "alpha", "waiting", who)

			release()
			if res := h.Wait(30 * time.Second); res.Code != 0 {
				t.Fatalf("uid A's hold once the locker exited: exit %d\n%s", res.Code, res.Stderr)
			}
			requireNoneLeft(t, mark)
		})
	}
}

// B writes a granted ticket naming a process of its own that holds the
// token and keeps the ticket locked: it is the holder the queue shows, but
// no gpu-hold, and queue and the waiting hold say so. Root's hold waits
// (it may act as B on the dead holder the ticket becomes once its process
// exits: a non-root one would wait for B to run nothing at all, T5).
func TestLockerOnItsOwnGrantedTicket(t *testing.T) {
	f := newFleet(t, "proc")
	prepRes(t, f, "gpu")
	token := filepath.Join(f.Dir, "gpu", "token")
	id, release := heldAs(t, userCred(uidB), newMark(t), token, locksFile(t, token))
	var ns syscall.Stat_t
	if err := syscall.Stat("/proc/self/ns/pid", &ns); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tk := map[string]any{"seq": forgedSeq, "resource": "gpu", "holder": id, "uid": uidB, "host": hostname(), "pid_ns": ns.Ino,
		"label": "mine", "cmd": []string{"python", "train.py"}, "created": now, "granted": now}
	b, _ := json.Marshal(tk)
	ticket := filepath.Join(f.Dir, "gpu", fmt.Sprintf("t.%020d", forgedSeq))
	writeAs(t, userCred(uidB), ticket, append(b, '\n'))
	_, unlockTicket := heldAs(t, userCred(uidB), newMark(t), ticket, locksFile(t, ticket))
	defer unlockTicket()

	st := qStatus(t, f.Dir, "gpu")
	if st.Holder == nil || st.Holder.Seq != forgedSeq {
		t.Fatalf("holder %+v, want uid %d's granted ticket %d whose process holds the token", st.Holder, uidB, forgedSeq)
	}
	who := fmt.Sprintf("pid %d (uid %d: flock -o %s cat", id.PID, uidB, token)
	r := qCmd(t, f.Dir, "queue", "-r", "gpu")
	requireSays(t, "gpu-hold queue", r.Stdout, who, fmt.Sprintf("granted ticket %d", forgedSeq), "not a gpu-hold")
	if l := qLockerOf(t, f.Dir, "gpu", id.PID); l == nil || !l.Granted || l.Ticket != forgedSeq || l.Comm != "flock" {
		t.Errorf("gpu-hold queue --json's locker %+v, want flock on granted ticket %d", l, forgedSeq)
	}

	mark := newMark(t)
	h := f.Root.start(t, f.Dir, mark, f.Scratch, "-l", "after", "--", "true")
	msg := logWith(t, h, fmt.Sprintf("pid %d", id.PID))
	requireSays(t, "the waiting hold's log", msg, who, fmt.Sprintf("granted ticket %d", forgedSeq), "not a gpu-hold")
	release()
	if res := h.Wait(30 * time.Second); res.Code != 0 {
		t.Fatalf("root's hold once the locker exited: exit %d\n%s", res.Code, res.Stderr)
	}
	requireNoneLeft(t, mark)
}
