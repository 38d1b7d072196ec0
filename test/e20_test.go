// e20_test.go owns E20 on a live hold: a member of a user's hold becomes
// another user (a setuid program) and ignores TERM. The hold may not
// signal it: it names it as a survivor, with its new uid, releases the
// token with that record, and does not spin on it meanwhile.
package test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/proc"
)

func TestE20MemberBecomesAnotherUser(t *testing.T) {
	f := newFleet(t, "proc")
	t.Parallel()
	res := "e20"
	prepRes(t, f, res)
	prog := becomeUser(t)
	mark, d := newMark(t), openDir(t)
	body := fmt.Sprintf("%q %d \"$GH_T/c\" &\nawait c\nsleep 0.5\n", prog, uidB)
	payload := script(t, d, "e20.sh", body)
	r := f.A.start(t, f.Dir, mark, d, "-r", res, "-g", "1s", "--survivor-wait", "2s", "--", payload[0], payload[1]).Wait(30 * time.Second)
	defer killMarked(mark)
	member := stat(t, readPid(t, d+"/c", time.Second)).Ident
	e := requireEnd(t, r, 0, true)
	if !proc.Alive(member) || proc.UID(member.PID) != uidB {
		t.Fatalf("test shape: the member (pid %d) is not alive as uid B (%d)\nstderr:\n%s", member.PID, uidB, r.Stderr)
	}
	if len(e.Survivors) != 1 || e.Survivors[0].PID != member.PID || e.Survivors[0].Start != member.Start {
		t.Errorf("\"hold ended\" survivors %v, want the member that became uid B (%v)\nstderr:\n%s", e.Survivors, member, r.Stderr)
	}
	if !strings.Contains(r.Stderr, "may not signal") || !strings.Contains(r.Stderr, fmt.Sprint(uidB)) {
		t.Errorf("no warning names the member's new uid %d\nstderr:\n%s", uidB, r.Stderr)
	}
	// 2 s of survivor wait at the rescan pace is about 40 passes; a chase
	// of a process it may not signal made hundreds.
	lines := logLines(r.Stderr)
	if i := findLog(lines, "KILL passes"); i >= 0 {
		if n, _ := lines[i].num("passes"); n > 100 {
			t.Errorf("%v KILL passes in 2 s over a process the hold may not signal: it spins", n)
		}
	}
	if findLog(lines, "token released") < 0 {
		t.Errorf("the token was not released with the survivor recorded\nstderr:\n%s", r.Stderr)
	}
}
