// ops_users_test.go owns cancel across real uids: another user may not
// cancel a running hold, root may (and the hold ends through its teardown,
// exit 77); and a forged ticket naming a process of root's, even one
// called gpu-hold, gets no signal when root cancels that user's tickets.
package test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/proc"
)

func TestCancelAcrossUsers(t *testing.T) {
	f := newFleet(t, "proc")
	declareRes(t, f, "gpu")
	mark := newMark(t)
	h := f.A.start(t, f.Dir, mark, f.Scratch, "-l", "alpha", "-g", "1s", "--", "sleep", "300")
	tk := *qWaitFor(t, f.Dir, "gpu", "alpha holding", qHeldBy("alpha")).Holder
	out, err := asUser(t, userCred(uidB), mark, bin, "--dir", f.Dir, "cancel", tk.HoldID)
	if err == nil || !strings.Contains(out, "only its owner or root may cancel it") {
		t.Errorf("uid %d cancelling uid %d's hold: %v\n%s", uidB, uidA, err, out)
	}
	if st := qStatus(t, f.Dir, "gpu"); st.Holder == nil || st.Holder.HoldID != tk.HoldID {
		t.Fatalf("the hold is gone after another user's cancel: %+v", st)
	}
	if r := qCmd(t, f.Dir, "cancel", "--user", "61001"); r.Code != 0 {
		t.Fatalf("root cancelling uid %d's hold: exit %d\n%s%s", uidA, r.Code, r.Stdout, r.Stderr)
	}
	requireEnd(t, h.Wait(30*time.Second), 77, false)
	requireNoneLeft(t, mark)
}

func TestCancelForgedTicketSignalsNothing(t *testing.T) {
	f := newFleet(t, "proc")
	mark := newMark(t)
	// A root process named gpu-hold (a copy of sleep), outside any hold.
	fake := filepath.Join(openDir(t), "gpu-hold")
	b, err := os.ReadFile("/bin/sleep")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(fake, b, 0o755)
	c := exec.Command(fake, "300")
	c.Env = append(os.Environ(), markEnv+"="+mark)
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	go c.Wait()
	waitComm(t, c.Process.Pid, "gpu-hold", 5*time.Second)
	st, _ := proc.ReadStat(c.Process.Pid)
	for _, victimID := range []proc.Ident{st.Ident, victim(t, nil, mark)} {
		prepRes(t, f, "gpu")
		forgeTicket(t, f, "gpu", victimID, fakeHoldID(), "")
		r := qCmd(t, f.Dir, "cancel", "-r", "gpu", "--user", strconv.Itoa(uidForger))
		t.Logf("root's cancel of uid %d's forged ticket naming %v: exit %d\n%s%s", uidForger, victimID, r.Code, r.Stdout, r.Stderr)
		time.Sleep(100 * time.Millisecond) // a SIGUSR1 would end it at once
		requireVictimAlive(t, victimID, "the process a forged ticket named")
		os.Remove(filepath.Join(f.Dir, "gpu", "t.00000000000000000100"))
	}
}
