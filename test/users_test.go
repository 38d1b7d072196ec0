// users_test.go owns what the multi-user trust tests share: a fleet-style
// queue directory (root-owned, setgid, sticky, group-writable) that root and
// two unprivileged test users use at once, the rigs that run holds as each
// of them, and a marked victim process that must survive what a hostile
// user plants.
package test

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/testenv"
)

// The test users: numeric ids with no passwd entry (setpriv-style), both in
// the fleet group, so the tests need no user set-up on the host.
const (
	fleetGID = 61000
	uidA     = 61001
	uidB     = 61002
	// uidLone runs in one test only, so that "this user runs nothing"
	// cannot be made false by another test running at the same time.
	uidLone = 61003
	// uidForger forges tickets in the forgery tests only: a successor of
	// another user goes on only when the forger's uid runs nothing, which
	// holds only for a uid no test running beside it uses.
	uidForger = 61004
)

// fleet is one shared queue directory and the rigs of its three users.
type fleet struct {
	Dir     string // the queue dir (--dir): root-owned, 03775, group fleetGID
	Scratch string // a scratch dir every user may write (payload markers)
	Root    rig
	A, B    rig
}

// userCred is uid's credential: its own group, and the fleet group.
func userCred(uid int) *syscall.Credential {
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: []uint32{fleetGID}}
}

// newFleet makes a fleet directory as an admin would (install -d -m 3775
// -o root -g GROUP) and the rigs that run holds in it as root, uidA and
// uidB, each from the binary they can all execute. be selects
// the backend flags of the root rig (the users fall back to procfs).
func newFleet(t *testing.T, be string) *fleet {
	t.Helper()
	testenv.NeedRoot(t, "running holds as several real uids")
	// The harness builds the binary into a directory every user may
	// enter (no copy: one written while other tests fork can fail to exec
	// with ETXTBSY).
	userBin := bin
	f := &fleet{Dir: fleetDir(t), Scratch: openDir(t)}
	f.Root = rigFor(be)
	f.Root.Bin = userBin
	f.A = rig{Name: "uidA", Track: []string{"--track=auto"}, Bin: userBin, Cred: userCred(uidA)}
	f.B = rig{Name: "uidB", Track: []string{"--track=auto"}, Bin: userBin, Cred: userCred(uidB)}
	return f
}

// fleetDir makes a root-owned, setgid, sticky, group-writable directory of
// group fleetGID inside a directory every user can reach.
func fleetDir(t *testing.T) string {
	t.Helper()
	return adminDir(t, openDir(t), "gpu-hold")
}

// adminDir makes parent/name as an admin makes a shared directory
// (install -d -m 3775 -o root -g GROUP) and returns its path.
func adminDir(t *testing.T, parent, name string) string {
	t.Helper()
	d := filepath.Join(parent, name)
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(d, 0, fleetGID); err != nil {
		t.Fatal(err)
	}
	// chmod after mkdir: umask must not drop the group's write bit.
	if err := os.Chmod(d, 0o775|os.ModeSetgid|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	return d
}

// asUser runs name args as cred (nil: as the test) with mark in its
// environment, and returns its combined output and error.
func asUser(t *testing.T, cred *syscall.Credential, mark, name string, args ...string) (string, error) {
	t.Helper()
	c := exec.Command(name, args...)
	c.Env = append(os.Environ(), markEnv+"="+mark)
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cred}
	out, err := c.CombinedOutput()
	return string(out), err
}

// victim starts a marked, TERM-ignoring process as cred (nil: root) in a
// session of its own, outside any hold: what a hostile user tries to make
// a hold signal. It returns the process's identity; the test's cleanup
// ends it (it carries mark).
func victim(t *testing.T, cred *syscall.Credential, mark string) proc.Ident {
	t.Helper()
	c := exec.Command("bash", "-c", `trap "" TERM; exec sleep 300`)
	c.Env = append(os.Environ(), markEnv+"="+mark)
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: cred}
	if err := c.Start(); err != nil {
		t.Fatalf("starting a victim process: %v", err)
	}
	go c.Wait() // reaped when it dies, so it never lingers as a zombie
	waitComm(t, c.Process.Pid, "sleep", 5*time.Second)
	st, err := proc.ReadStat(c.Process.Pid)
	if err != nil {
		t.Fatalf("identifying the victim: %v", err)
	}
	return st.Ident
}

// requireVictimAlive fails the test when id is no longer alive.
func requireVictimAlive(t *testing.T, id proc.Ident, what string) {
	t.Helper()
	if !proc.Alive(id) {
		t.Errorf("%s (pid %d) was signalled: it is no longer alive", what, id.PID)
	}
}
