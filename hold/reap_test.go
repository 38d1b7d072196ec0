// reap_test.go checks how a dead holder's reaper tells a dying holder from
// a live one.
package hold

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/cprog"
	"github.com/gpu-hold/gpu-hold/internal/mark"
	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/testenv"
)

// testMark is the environment entry that marks a process these tests
// start (as test/harness_test.go does), fresh for each.
func testMark() string { return mark.Env + "=" + mark.New() }

// A holder whose lock is gone may still be ending its last threads, its
// main thread already a zombie: that is a dying holder, not a forged ticket.
// The test holds the other thread of a zombie-leader process in a frozen
// cgroup v1 freezer, KILLs the process, and thaws the thread 300 ms later.
// A process that stays that way (not dying) is taken for alive.
//
// Catches: a reaper that takes the dying holder for alive at once and ends
// nothing of its lineage.
func TestHolderAliveWaitsForDyingThreads(t *testing.T) {
	testenv.NeedRoot(t, "freezing one thread in a cgroup v1 freezer")
	const root = "/sys/fs/cgroup/freezer"
	var fs syscall.Statfs_t
	if syscall.Statfs(root, &fs) != nil || fs.Type != 0x27e0eb {
		testenv.Need(t, "no cgroup v1 freezer at %s", root)
	}
	t.Run("dying", func(t *testing.T) {
		t.Parallel()
		cmd := cprog.StartZombieLeader(t, []string{testMark()})
		pid := cmd.Process.Pid
		st, err := proc.ReadStat(pid)
		if err != nil {
			t.Fatal(err)
		}
		tid := proc.LiveThread(pid)
		dir := filepath.Join(root, "gpu-hold-test-dying-"+strconv.Itoa(pid))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		thaw := func() { os.WriteFile(filepath.Join(dir, "freezer.state"), []byte("THAWED"), 0) }
		t.Cleanup(func() {
			thaw()
			cmd.Process.Kill()
			cmd.Wait()
			os.Remove(dir)
		})
		if err := os.WriteFile(filepath.Join(dir, "tasks"), []byte(strconv.Itoa(tid)), 0); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "freezer.state"), []byte("FROZEN"), 0); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		time.AfterFunc(300*time.Millisecond, thaw)
		t0 := time.Now()
		if holderAlive(st.Ident) {
			t.Errorf("a holder dying (its last thread thawed after 300 ms) was taken for alive after %v", time.Since(t0))
		}
	})
	t.Run("alive", func(t *testing.T) {
		t.Parallel()
		cmd := cprog.StartZombieLeader(t, []string{testMark()})
		st, err := proc.ReadStat(cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		if !holderAlive(st.Ident) {
			t.Errorf("a live process whose main thread exited was taken for dead")
		}
	})
}
