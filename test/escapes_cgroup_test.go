// escapes_cgroup_test.go owns the escape routes that need cgroups: E15 (a
// member that cannot be killed, made with the cgroup v1 freezer) and E17 (a
// member that moves itself into a sibling cgroup v2).
package test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/testenv"
)

const (
	freezerRoot = "/sys/fs/cgroup/freezer"
	unifiedRoot = "/sys/fs/cgroup/unified"
)

// cgroupFS reports whether dir is the root of a mounted cgroup file system
// of the given magic.
func cgroupFS(dir string, magic int64) bool {
	var st syscall.Statfs_t
	return syscall.Statfs(dir, &st) == nil && int64(st.Type) == magic
}

const (
	cgroupV1Magic = 0x27e0eb
	cgroupV2Magic = 0x63677270
)

// testCgroup makes the cgroup dir (a child of root) and removes it after the
// test, once every process carrying mark is dead. before runs first (the
// freezer thaws).
func testCgroup(t *testing.T, root, mark string, before func(dir string)) string {
	t.Helper()
	dir := filepath.Join(root, "gpu-hold-test-"+mark)
	if err := os.Mkdir(dir, 0o755); err != nil {
		testenv.Need(t, "cannot make a test cgroup under %s: %v", root, err)
	}
	t.Cleanup(func() {
		if before != nil {
			before(dir)
		}
		killMarked(mark)
		waitUnmarked(mark, 5*time.Second)
		for i := 0; ; i++ {
			err := os.Remove(dir)
			if err == nil || errors.Is(err, os.ErrNotExist) {
				return
			}
			if i == 100 {
				t.Errorf("removing test cgroup %s: %v", dir, err)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	return dir
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0); err != nil {
		t.Fatalf("writing %q to %s: %v", s, path, err)
	}
}

// E15: a member that cannot be killed: the test moves it into a cgroup v1
// freezer and freezes it; a frozen task does not die on SIGKILL until it
// is thawed (it sits in state D). --survivor-wait 2s.
//
// Catches: a KILL loop "until empty" with no bound (never returns, the
// token is never released); a survivor not reported, or reported by bare
// pid or by a wrong identity; a token kept because of the survivor.
func TestE15UnkillableMember(t *testing.T) { forBackends(t, true, routeE15) }

func routeE15(t *testing.T, rg rig) {
	if !cgroupFS(freezerRoot, cgroupV1Magic) || !exists(filepath.Join(freezerRoot, "cgroup.procs")) {
		testenv.Need(t, "no cgroup v1 freezer at %s to make an unkillable member with", freezerRoot)
	}
	mark := newMark(t)
	d, q := rg.dirs(t)
	cg := testCgroup(t, freezerRoot, mark, func(dir string) {
		os.WriteFile(filepath.Join(dir, "freezer.state"), []byte("THAWED"), 0)
	})
	script(t, d, "member.sh", `put member $$; exec sleep 300`)
	// The member lets go of the hold's stdout and stderr: it outlives the
	// hold, and would keep os/exec's Wait waiting on the pipes.
	payload := script(t, d, "root.sh", `bash "$GH_T/member.sh" >/dev/null 2>&1 &
await member
exec sleep 300
`)
	// The member must be frozen before the max hold: scaled where holds
	// start slowly (make test-kernels' guest, see slowed).
	const grace, survivorWait = time.Second, 2 * time.Second
	maxHold := slowed(1500 * time.Millisecond)
	h := rg.start(t, q, mark, d, holdArgs(payload, "-t", maxHold.String(), "-g", "1s", "--survivor-wait", "2s")...)
	member := readPid(t, filepath.Join(d, "member"), 10*time.Second)
	// Frozen only once it runs sleep: a task still in its exec (slow over
	// the guest's 9p root) can hold the freezer in FREEZING.
	awaitComm(t, member, "sleep", slowed(2*time.Second))
	st := stat(t, member)
	leftBehind(t, member, mark, func() { os.WriteFile(filepath.Join(cg, "freezer.state"), []byte("THAWED"), 0) })
	writeFile(t, filepath.Join(cg, "cgroup.procs"), strconv.Itoa(member))
	writeFile(t, filepath.Join(cg, "freezer.state"), "FROZEN")
	for deadline := time.Now().Add(slowed(3 * time.Second)); ; time.Sleep(10 * time.Millisecond) {
		b, _ := os.ReadFile(filepath.Join(cg, "freezer.state"))
		if strings.TrimSpace(string(b)) == "FROZEN" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("test shape: the freezer did not freeze the member (state %q)", b)
		}
	}

	r := h.Wait(30 * time.Second)
	e := requireEnd(t, r, 124, true)
	want := survivor{PID: member, Start: st.Start}
	if len(e.Survivors) != 1 || e.Survivors[0] != want {
		t.Errorf("\"hold ended\" survivors = %+v, want exactly %+v", e.Survivors, want)
	}
	// From the max hold (the start of a hold is what a loaded host
	// stretches most), scaled as the host is slow: the member lives 300 s.
	if took, within := sinceLogged(t, r, "max hold reached"), grace+survivorWait+bound(3*time.Second); took > within {
		t.Errorf("hold returned %v after its max hold, want within %v (grace + survivor wait + 3 s, scaled)", took, within)
	}
	if left := marked(mark); len(left) != 1 || left[0] != member {
		t.Errorf("test shape: want only the frozen member %d alive after the hold, got%s", member, describe(left))
	}
	requireReleased(t, rg, q)
}

// E17: a member moves itself into a sibling cgroup (writes its pid to the
// sibling's cgroup.procs, as `systemd-run --scope` does), then ignores TERM.
//
// Catches: a teardown that ends only the payload's cgroup (cgroup.kill) and
// group: the member left both, and only the lineage still has it.
func TestE17LeavesCgroup(t *testing.T) { forBackends(t, true, routeE17) }

func routeE17(t *testing.T, rg rig) {
	if !cgroupFS(unifiedRoot, cgroupV2Magic) {
		testenv.Need(t, "no cgroup v2 at %s", unifiedRoot)
	}
	// With a grace the member is known alive when the KILL pass begins;
	// with none, the pass starts with cgroup.kill and must still look
	// beyond the emptied cgroup and the group.
	for _, grace := range []string{"1s", "0"} {
		t.Run("grace-"+grace, func(t *testing.T) {
			t.Parallel()
			mark := newMark(t)
			d, q := rg.dirs(t)
			cg := cgroupLeaver(t, d, mark)
			payload := script(t, d, "root.sh", `setsid bash "$GH_T/member.sh" &
await member
exec sleep 300
`)
			h := rg.start(t, q, mark, d, holdArgs(payload, "-t", slow(time.Second), "-g", slowText(grace))...)
			member := readPid(t, filepath.Join(d, "member"), 10*time.Second)
			b, err := os.ReadFile("/proc/" + strconv.Itoa(member) + "/cgroup")
			if err != nil || !strings.Contains(string(b), "0::/"+filepath.Base(cg)+"\n") {
				t.Fatalf("test shape: member %d is not in %s: %q %v", member, cg, b, err)
			}
			r := h.Wait(20 * time.Second)
			e := requireEnd(t, r, 124, false)
			requireNoneLeft(t, mark)
			// The member outside the cgroup is KILLed on its own; the
			// cgroup (bpf's rig has one, procfs's none) is killed whole.
			if e.Kill < 1 || e.CgroupKilled != (rg.Name == "bpf") {
				t.Errorf("\"hold ended\" says kill %d, cgroup_killed %v: want the escaped member KILLed on its own, and cgroup_killed %v", e.Kill, e.CgroupKilled, rg.Name == "bpf")
			}
		})
	}
}

// cgroupLeaver makes a sibling cgroup v2 for the test and writes
// member.sh into d: a member that moves itself into that cgroup, ignores
// TERM and puts its pid in d/member. It returns the cgroup's path.
func cgroupLeaver(t *testing.T, d, mark string) string {
	t.Helper()
	cg := testCgroup(t, unifiedRoot, mark, nil)
	script(t, d, "member.sh", `echo $$ > '`+cg+`/cgroup.procs' || exit 3
trap "" TERM
put member $$
exec sleep 300
`)
	return cg
}

// leftBehind notes the hold's own cgroup v2 of pid (when it has one): the
// hold cannot remove it while the frozen survivor is in it, so the test
// removes it once the survivor is thawed (by thaw) and dead.
func leftBehind(t *testing.T, pid int, mark string, thaw func()) {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return
	}
	for _, l := range strings.Split(string(b), "\n") {
		rel, ok := strings.CutPrefix(l, "0::/")
		if !ok || !strings.HasPrefix(filepath.Base(rel), "gpu-hold-") || strings.Contains(rel, "gpu-hold-test-") {
			continue
		}
		dir := filepath.Join(unifiedRoot, rel)
		t.Cleanup(func() {
			thaw()
			killMarked(mark)
			waitUnmarked(mark, 5*time.Second)
			for i := 0; i < 100 && exists(dir); i++ {
				if os.Remove(dir) == nil {
					t.Logf("removed the hold's cgroup %s, left behind with the survivor in it", dir)
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

// awaitComm waits until pid's command name is comm (its exec is done).
func awaitComm(t *testing.T, pid int, comm string, bound time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(bound); ; time.Sleep(10 * time.Millisecond) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
		if err == nil && strings.TrimSpace(string(b)) == comm {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("test shape: %d is not running %s after %v (comm %q, %v)", pid, comm, bound, b, err)
		}
	}
}
