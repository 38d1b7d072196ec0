// lock_owner_test.go owns the tests of naming who holds a queue lock when
// /proc/locks names a process that does not: the shell idiom
// `exec 9<token; flock 9`, whose flock(1) took the lock and exited, and a
// taker whose pid names an unrelated process now.
package queue

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/testenv"
)

// shellLock starts bash as uid (0: as the test) that opens path as fd 9
// and locks it with flock(1), which exits; bash holds the lock on until
// its stdin closes. It returns bash's identity and flock's pid.
func shellLock(t *testing.T, path string, uid int) (proc.Ident, int) {
	t.Helper()
	if _, err := exec.LookPath("flock"); err != nil {
		testenv.Need(t, "flock(1) (util-linux) is unavailable here, and it is needed to take a lock in a child that exits")
	}
	c := exec.Command("bash", "-c", `exec 9<"$1"; flock -n 9 & f=$!; wait $f || exit 1; echo "$f"; exec cat >/dev/null`, "bash", path)
	c.Env = append(os.Environ(), "GPU_HOLD_TEST_MARK="+testMark)
	if uid != 0 {
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
		c.Dir = "/"
	}
	in, _ := c.StdinPipe()
	out, _ := c.StdoutPipe()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); c.Process.Kill(); c.Wait() })
	sc := bufio.NewScanner(out)
	if !sc.Scan() {
		t.Fatalf("the shell never took the lock of %s", path)
	}
	flockPID, _ := strconv.Atoi(strings.TrimSpace(sc.Text()))
	waitComm(t, c.Process.Pid, "cat")
	st, err := proc.ReadStat(c.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	return st.Ident, flockPID
}

// waitComm waits until pid's name is comm.
func waitComm(t *testing.T, pid int, comm string) {
	t.Helper()
	waitFor(t, fmt.Sprintf("pid %d run %s", pid, comm), func() bool {
		st, err := proc.ReadStat(pid)
		return err == nil && st.Comm == comm
	})
}

// ESCAPES T6: /proc/locks names the process that took a lock, which need
// not be the one that holds it. Status, run as root, names the holder
// (uid 65534's shell, which holds it through its fd 9) and the exited
// taker; so does the waiter it holds up.
func TestLockerTakenByAnExitedProcess(t *testing.T) {
	q, uid := lockerQueue(t)
	if uid == 0 {
		t.Skip("naming another process's lock needs root (this reader reads only its own processes' fds otherwise)")
	}
	tl, err := q.openToken()
	if err != nil {
		t.Fatal(err)
	}
	tl.close()
	id, taker := shellLock(t, filepath.Join(q.path, tokenName), uid)
	if q.lockHolders()[taker] == 0 {
		t.Fatalf("/proc/locks does not name flock %d as the token's taker: %v", taker, q.lockHolders())
	}
	st, err := q.Status()
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Lockers) != 1 || st.Lockers[0].Process != id || st.Lockers[0].TakenBy != taker || st.Lockers[0].UID != uid || st.Lockers[0].Comm != "cat" {
		t.Fatalf("Status lockers %+v, want the shell %v of uid %d, holding the token through the fd flock %d took it on", st.Lockers, id, uid, taker)
	}
	if d := st.Lockers[0].Describe(); !strings.Contains(d, fmt.Sprintf("taker, pid %d, left it", taker)) {
		t.Errorf("Describe() = %q", d)
	}
	w, err := q.Enqueue(Ticket{Label: "waiter"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 60*time.Second)
	seen := make(chan *Locker, 64)
	go w.Wait(ctx, func(p Position) { seen <- p.Locker })
	requireLockerShown(t, seen, id, "token")
	w.Cancel()
}

// A taker whose pid names an unrelated process now (the table, as a test
// seam, names a live process of the test's that never had the token) is
// not named as the locker: the process that holds the lock is.
func TestLockerTakerPidReused(t *testing.T) {
	q, uid := lockerQueue(t)
	tl, err := q.openToken()
	if err != nil {
		t.Fatal(err)
	}
	tl.close()
	id, _ := shellLock(t, filepath.Join(q.path, tokenName), uid)
	other := exec.Command("sleep", "300")
	other.Env = append(os.Environ(), "GPU_HOLD_TEST_MARK="+testMark)
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Process.Kill(); other.Wait() })
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(q.path, tokenName), &st); err != nil {
		t.Fatal(err)
	}
	table := filepath.Join(t.TempDir(), "locks")
	line := fmt.Sprintf("1: FLOCK  ADVISORY  WRITE %d %s 0 EOF\n", other.Process.Pid, keyOf(st.Dev, st.Ino))
	if err := os.WriteFile(table, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	saved := lockTable
	lockTable = table
	defer func() { lockTable = saved }()
	s, err := q.Status()
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Lockers) != 1 || s.Lockers[0].Process != id || s.Lockers[0].TakenBy != other.Process.Pid {
		t.Fatalf("Status lockers %+v, want the shell %v that holds the token, not sleep %d whose pid the table names", s.Lockers, id, other.Process.Pid)
	}
}

// ESCAPES T6: a process of uid 65534 that holds the ticket counter's lock
// for ever keeps every hold from queueing. An enqueue gives up within its
// bound and names it (pid, user, command), and Status lists it.
func TestCounterLockerIsNamed(t *testing.T) {
	q, uid := lockerQueue(t)
	w, err := q.Enqueue(Ticket{Label: "first"}) // the counter exists, as after any hold
	if err != nil {
		t.Fatal(err)
	}
	w.Cancel()
	id, release := lockWith(t, q, filepath.Join(q.path, seqName), uid)
	defer release()
	saved := counterWait
	counterWait = 200 * time.Millisecond
	defer func() { counterWait = saved }()
	_, err = q.Enqueue(Ticket{Label: "second"})
	want := fmt.Sprintf("ticket counter %s/seq has been locked for 200ms by pid %d (%s: flock -o", q.path, id.PID, UserName(max(uid, os.Geteuid())))
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("an enqueue behind a held counter: %v, want an error that says %q", err, want)
	}
	st, err := q.Status()
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Lockers) != 1 || st.Lockers[0].Process != id || st.Lockers[0].Lock != "ticket counter" {
		t.Errorf("Status lockers %+v, want flock %v holding the ticket counter", st.Lockers, id)
	}
}

// A granted ticket its user wrote, naming a process of its own that holds
// only the ticket counter's lock, is no holder: the counter's lock is no
// sign of the token.
func TestCounterLockMakesNoHolder(t *testing.T) {
	q := openQ(t, t.TempDir(), "gpu")
	w, err := q.Enqueue(Ticket{Label: "first"})
	if err != nil {
		t.Fatal(err)
	}
	w.Cancel()
	id, release := lockWith(t, q, filepath.Join(q.path, seqName), 0)
	defer release()
	plantLocked(t, q, Ticket{Seq: 5, Resource: "gpu", UID: os.Geteuid(), Holder: id, PidNS: ownPidNS(), Label: "forged", Created: time.Now(), Granted: time.Now()}, os.Geteuid())
	st, err := q.Status()
	if err != nil {
		t.Fatal(err)
	}
	if st.Holder != nil {
		t.Errorf("holder %+v: a process holding only the counter's lock was taken for the token's holder", st.Holder)
	}
}

// An fcntl lock (OFD or POSIX) on the token or the directory does not
// hold the queue up: on a local filesystem it and flock(2) do not
// conflict, so the queue neither waits for one nor has to name it.
func TestFcntlLockHoldsNothingUp(t *testing.T) {
	q := openQ(t, t.TempDir(), "gpu")
	tl, err := q.openToken()
	if err != nil {
		t.Fatal(err)
	}
	tl.close()
	f, err := os.OpenFile(filepath.Join(q.path, tokenName), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lk := unix.Flock_t{Type: unix.F_WRLCK}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk); err != nil {
		t.Fatalf("F_OFD_SETLK: %v", err)
	}
	take(t, q, "past an OFD lock").Release()
	if st, _ := q.Status(); len(st.Lockers) != 0 {
		t.Errorf("lockers %+v: an fcntl lock was named", st.Lockers)
	}
}
