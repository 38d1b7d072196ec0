// seams_resource_test.go owns the seam between -r and the resources a
// shared queue dir declares: a hold on a name nobody declared (a typo, the
// wrong case, a dir a user's hold once made) is refused before it queues
// or creates anything, with the declared names and "did you mean", while a
// name root declared (its dir, or resources.json) holds as any other.
package test

import (
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	marks "github.com/gpu-hold/gpu-hold/internal/mark"
)

// A shared fleet dir, uid A holding gpu: uid B's and root's holds on
// gpus and GPU exit 125 naming gpu, run nothing and make no dir, as do
// names of invalid shapes (a trailing space, a path); a gpus/ that uid A
// made does not declare gpus; fpga (made by root) and tpu (in
// root's resources.json) hold at once.
//
// Catches: a hold creating <dir>/<typo>/ and running its payload at once,
// beside the gpu holder, without the gpu token.
func TestHoldUndeclaredResourceRefused(t *testing.T) {
	f := newFleet(t, "proc")
	declareRes(t, f, "gpu")
	mark := newMark(t)
	h := f.A.start(t, f.Dir, mark, f.Scratch, "-l", "alpha", "-g", "1s", "--", "sleep", "300")
	qWaitFor(t, f.Dir, "gpu", "alpha holding", qHeldBy("alpha"))
	for _, c := range []struct {
		who, res string
		cred     *syscall.Credential
	}{{"uidB", "gpus", f.B.Cred}, {"uidB", "GPU", f.B.Cred}, {"root", "gpus", nil}} {
		t.Run(c.who+" "+c.res, func(t *testing.T) {
			r, ran := holdMarking(t, f, c.cred, mark, c.res)
			requireOneLineError(t, r, 125, `resource "`+c.res+`" is not declared`)
			requireMentions(t, r.Stderr, `did you mean "gpu"\?`, `declared resources are gpu, npu\b`)
			if exists(ran) {
				t.Errorf("the payload of the hold on %s ran", c.res)
			}
			if _, err := os.Lstat(filepath.Join(f.Dir, c.res)); err == nil {
				t.Errorf("the refused hold created %s/%s", f.Dir, c.res)
			}
		})
	}
	t.Run("invalid shapes", func(t *testing.T) {
		for _, res := range []string{"gpu ", "../gpu"} {
			r, ran := holdMarking(t, f, f.B.Cred, mark, res)
			requireOneLineError(t, r, 125, `resource name ".*" is invalid.*did you mean "gpu"\?`)
			if exists(ran) {
				t.Errorf("the payload of the hold on %q ran", res)
			}
		}
	})
	t.Run("a user's dir declares nothing", func(t *testing.T) {
		userMade(t, filepath.Join(f.Dir, "gpus"), uidA)
		for _, cred := range []*syscall.Credential{f.A.Cred, f.B.Cred} {
			r, ran := holdMarking(t, f, cred, mark, "gpus")
			requireOneLineError(t, r, 125, `resource "gpus" is not declared`)
			requireMentions(t, r.Stderr, `belongs to uid 61001`, `did you mean "gpu"\?`)
			if exists(ran) {
				t.Errorf("uid %d's hold on a user's gpus/ ran its payload", cred.Uid)
			}
		}
	})
	t.Run("root declared", func(t *testing.T) {
		adminDir(t, f.Dir, "fpga")
		if err := os.WriteFile(filepath.Join(f.Dir, "resources.json"), []byte(`{"tpu": {"devices": []}}`), 0o644); err != nil {
			t.Fatal(err)
		}
		// The root timer makes a declared resource's dir: a user's hold
		// may not (seams_redteam_test.go).
		if r := qCmd(t, f.Dir, "reap", "--all"); r.Code != 0 {
			t.Fatalf("root's reap --all: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
		}
		for _, res := range []string{"fpga", "tpu"} {
			r, ran := holdMarking(t, f, f.B.Cred, mark, res)
			if r.Code != 0 || !exists(ran) {
				t.Errorf("uid B's hold on %s, which root declared: exit %d, payload ran: %v\n%s", res, r.Code, exists(ran), r.Stderr)
			}
		}
	})
	if r := qCmd(t, f.Dir, "cancel", "--user", "61001"); r.Code != 0 {
		t.Fatalf("root cancelling uid %d's gpu hold: exit %d\n%s%s", uidA, r.Code, r.Stdout, r.Stderr)
	}
	requireEnd(t, h.Wait(30*time.Second), 77, false)
	requireNoneLeft(t, mark)
}

// holdMarking runs a hold on res as cred (nil: root) whose payload writes
// a marker file, and returns its result and the marker's path.
func holdMarking(t *testing.T, f *fleet, cred *syscall.Credential, mark, res string) (result, string) {
	t.Helper()
	name := "ran-" + marks.New() // unique: the subtests share the scratch dir
	r := runRaw(t, bin, cred, mark, f.Scratch, "--dir", f.Dir, "-r", res, "-w", "20s", "-g", "1s", "--", "bash", "-c", `echo 1 > "$GH_T/`+name+`"`)
	return r, filepath.Join(f.Scratch, name)
}

// requireMentions fails the test for each regexp s does not match.
func requireMentions(t *testing.T, s string, res ...string) {
	t.Helper()
	for _, re := range res {
		if !regexp.MustCompile(re).MatchString(s) {
			t.Errorf("want a mention of %q in:\n%s", re, s)
		}
	}
}

// userMade makes dir as uid's hold in a shared dir did before holds were
// refused undeclared names: owned by uid, mode 03775.
func userMade(t *testing.T, dir string, uid int) {
	t.Helper()
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, uid, fleetGID); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o775|os.ModeSetgid|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
}

// declareRes declares res in f's dir as an admin does (install -d as
// root), unless it is there: holds in a shared dir queue only for
// declared resources.
func declareRes(t *testing.T, f *fleet, res string) {
	t.Helper()
	if _, err := os.Lstat(filepath.Join(f.Dir, res)); err != nil {
		adminDir(t, f.Dir, res)
	}
}
