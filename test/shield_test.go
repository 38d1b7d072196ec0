// shield_test.go owns the test that a payload cannot reach into its own
// hold: as the hold's own user it could otherwise ptrace it (clear its
// child-subreaper flag, so that its orphans go to init unseen) or read
// its memory.
package test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A user's payload reads its own environ (its uid's, dumpable: the check
// can pass) and then its hold's, which must be refused: what decides a
// read of another process's environ is what decides a ptrace of it.
func TestPayloadCannotReachItsHold(t *testing.T) {
	f := newFleet(t, "proc")
	t.Parallel()
	res := "shield"
	prepRes(t, f, res)
	mark, d := newMark(t), openDir(t)
	if err := os.Chmod(d, 0o777); err != nil {
		t.Fatal(err)
	}
	body := `cat /proc/$$/environ > /dev/null && echo own > "$GH_T/own"
cat /proc/$PPID/environ > /dev/null 2> "$GH_T/err" && echo hold > "$GH_T/hold"
echo done > "$GH_T/done"`
	r := f.A.start(t, f.Dir, mark, d, "-r", res, "-g", "1s", "--", "bash", "-c", body).Wait(30 * time.Second)
	requireEnd(t, r, 0, false)
	if !exists(filepath.Join(d, "done")) || !exists(filepath.Join(d, "own")) {
		t.Fatalf("test shape: the payload did not run, or could not read its own environ\nstderr:\n%s", r.Stderr)
	}
	if exists(filepath.Join(d, "hold")) {
		t.Errorf("the payload (uid %d) read its hold's environ: it could ptrace its hold", uidA)
	}
	if b, _ := os.ReadFile(filepath.Join(d, "err")); !strings.Contains(string(b), "denied") {
		t.Errorf("the payload's read of its hold's environ failed otherwise than denied: %q", b)
	}
	requireNoneLeft(t, mark)
}
