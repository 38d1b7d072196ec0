// guard_test.go owns the device filter's test against the kernel: a
// guarded node (a fake one: a major no driver has, so an open the filter
// lets through fails with ENXIO instead of EPERM) is refused to a process
// not allowed, let through by tgid and by uid, the refusal is streamed,
// and once the filter is closed every open is let through (fail-open).
package bpf

import (
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/cgroup"
	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/testenv"
)

// fakeChar makes a character node with a free major; it returns its path,
// major and minor.
func fakeChar(t *testing.T) (string, uint32, uint32) {
	t.Helper()
	b, _ := os.ReadFile("/proc/devices")
	used := map[uint32]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				used[uint32(n)] = true
			}
		}
	}
	for major := uint32(234); major <= 254; major++ {
		if !used[major] {
			// A random minor: tests of other packages may guard a fake
			// node of the same major at the same time.
			minor := uint32(rand.IntN(1 << 20))
			if s := os.Getenv("FAKE_MINOR"); s != "" {
				m, _ := strconv.Atoi(s)
				minor = uint32(m)
			}
			p := filepath.Join(t.TempDir(), "fake0")
			if err := unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(major, minor))); err != nil {
				testenv.Need(t, "mknod: %v", err)
			}
			return p, major, minor
		}
	}
	testenv.Need(t, "no free character major")
	return "", 0, 0
}

// openErr opens path and returns the errno (0: opened).
func openErr(path string) unix.Errno {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err == nil {
		unix.Close(fd)
		return 0
	}
	var en unix.Errno
	errors.As(err, &en)
	return en
}

func TestDeviceGuard(t *testing.T) {
	testenv.NeedRoot(t, "attaching a device filter to the cgroup root")
	mnt := cgroup.Mount()
	if mnt == "" {
		testenv.Need(t, "no cgroup v2 mount")
	}
	node, major, minor := fakeChar(t)
	if e := openErr(node); e != unix.ENXIO {
		t.Fatalf("test shape: the fake node opens with %v before any filter, want ENXIO", e)
	}
	g, err := LoadDeviceGuard(mnt)
	testenv.NeedBPF(t, err)
	closed := false
	defer func() {
		if !closed {
			g.Close()
		}
	}()
	if err := g.SetDevices([]DevID{{DevChar, major, minor}}); err != nil {
		t.Fatal(err)
	}
	if e := openErr(node); e != unix.EPERM {
		t.Fatalf("open of a guarded node by a process not allowed: %v, want EPERM", e)
	}
	g.rd.SetDeadline(time.Now().Add(10 * time.Second)) // a lost denial fails, it does not hang
	d, err := g.ReadDenial()
	if err != nil || d.TGID != uint32(os.Getpid()) || d.Dev != (DevID{DevChar, major, minor}) || d.Access&2 == 0 {
		t.Errorf("denial %+v (%v), want tgid %d, char %d:%d, read", d, err, os.Getpid(), major, minor)
	}
	if err := g.SetTGIDs(map[uint32]bool{uint32(os.Getpid()): true}); err != nil {
		t.Fatal(err)
	}
	if e := openErr(node); e != unix.ENXIO {
		t.Errorf("open by an allowed tgid: %v, want ENXIO (let through to the driverless node)", e)
	}
	g.SetTGIDs(nil)
	if err := g.SetUIDs(map[uint32]bool{uint32(os.Geteuid()): true}); err != nil {
		t.Fatal(err)
	}
	if e := openErr(node); e != unix.ENXIO {
		t.Errorf("open by an allowed uid: %v, want ENXIO", e)
	}
	g.SetUIDs(nil)
	if e := openErr("/dev/null"); e != 0 {
		t.Errorf("open of a node that is not guarded: %v", e)
	}
	if e := openErr(node); e != unix.EPERM {
		t.Errorf("open after the allowances were cleared: %v, want EPERM", e)
	}
	g.Close()
	closed = true
	if e := openErr(node); e != unix.ENXIO {
		t.Errorf("open after the filter was closed: %v, want ENXIO (fail-open)", e)
	}
}

// A member of a hold's pinned lineage, born after its lineage was put in
// the filter, opens the guarded node; the test itself (no member) cannot.
func TestDeviceGuardLineage(t *testing.T) {
	testenv.NeedRoot(t, "attaching a device filter to the cgroup root")
	mnt := cgroup.Mount()
	if mnt == "" {
		testenv.Need(t, "no cgroup v2 mount")
	}
	node, major, minor := fakeChar(t)
	d := t.TempDir()
	id := "guardtest-" + strconv.Itoa(os.Getpid()) + "-" + strconv.Itoa(rand.IntN(1<<30))
	l, _, _ := launchMarked(t, Options{HoldID: id}, `until [ -e "`+d+`/go" ]; do sleep 0.01; done
( exec 3<"`+node+`" ) 2>"`+d+`/out.tmp"; mv "`+d+`/out.tmp" "`+d+`/out"
sleep 300`)
	if _, err := l.Pin(); err != nil {
		t.Fatal(err)
	}
	defer l.Unpin()
	g, err := LoadDeviceGuard(mnt)
	testenv.NeedBPF(t, err)
	defer g.Close()
	if err := g.SetDevices([]DevID{{DevChar, major, minor}}); err != nil {
		t.Fatal(err)
	}
	if err := g.SetLineage(0, id); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(d, "go"), nil, 0o644)
	var out []byte
	for i := 0; i < 1000; i++ {
		if out, err = os.ReadFile(filepath.Join(d, "out")); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(string(out), "No such device or address") {
		t.Errorf("a newborn member of the pinned lineage opened the guarded node with %q, want ENXIO (let through)", out)
	}
	if e := openErr(node); e != unix.EPERM {
		t.Errorf("open by the test (not a member): %v, want EPERM", e)
	}
}

// A process below a holder (here the test: its child's child) opens the
// guarded node from its first instruction; a holder entry whose start
// time is not the process's (a reused pid) lets nothing through; a
// process below one running a launcher executable is let through.
func TestDeviceGuardHolders(t *testing.T) {
	testenv.NeedRoot(t, "attaching a device filter to the cgroup root")
	mnt := cgroup.Mount()
	if mnt == "" {
		testenv.Need(t, "no cgroup v2 mount")
	}
	node, major, minor := fakeChar(t)
	g, err := LoadDeviceGuard(mnt)
	testenv.NeedBPF(t, err)
	defer g.Close()
	if err := g.SetDevices([]DevID{{DevChar, major, minor}}); err != nil {
		t.Fatal(err)
	}
	self, err := proc.Self()
	if err != nil {
		t.Fatal(err)
	}
	grandchild := func() string {
		out, _ := exec.Command("bash", "-c", `bash -c 'exec 3<"$0"' "$0" 2>&1; true`, node).CombinedOutput()
		return string(out)
	}
	if err := g.SetHolders(map[uint32]uint64{uint32(self.PID): self.Start + 1}); err != nil {
		t.Fatal(err)
	}
	if out := grandchild(); !strings.Contains(out, "Operation not permitted") {
		t.Errorf("below a holder entry with another start time: %q, want EPERM", out)
	}
	if err := g.SetHolders(map[uint32]uint64{uint32(self.PID): self.Start}); err != nil {
		t.Fatal(err)
	}
	if out := grandchild(); !strings.Contains(out, "No such device or address") {
		t.Errorf("below a holder: %q, want ENXIO (let through)", out)
	}
	// Below a process running a launcher executable (here bash, the
	// grandchild's parent): let through without any holder entry.
	g.SetHolders(nil)
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal(err)
	}
	if err := g.SetLaunchers([]string{bash}); err != nil {
		t.Fatal(err)
	}
	if out := grandchild(); !strings.Contains(out, "No such device or address") {
		t.Errorf("below a launcher: %q, want ENXIO (let through)", out)
	}
	g.SetLaunchers(nil)
	if out := grandchild(); !strings.Contains(out, "Operation not permitted") {
		t.Errorf("with no holder and no launcher: %q, want EPERM", out)
	}
}

// The guard's read of a pinned lineage: a member by pid and start time,
// not the same pid with another start, not a process outside it.
func TestPinnedLineageHas(t *testing.T) {
	testenv.NeedRoot(t, "pinning a lineage")
	id := "pintest-" + strconv.Itoa(os.Getpid()) + "-" + strconv.Itoa(rand.IntN(1<<30))
	l, _, cmd := launchMarked(t, Options{HoldID: id}, `sleep 300`)
	if _, err := l.Pin(); err != nil {
		t.Fatal(err)
	}
	defer l.Unpin()
	p, err := OpenPinnedLineage(id)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var st proc.Stat
	for i := 0; i < 500; i++ {
		if st, err = proc.ReadStat(cmd.Process.Pid); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !p.Has(st.Ident) {
		t.Errorf("the payload %v is not a member of the pinned lineage", st.Ident)
	}
	if p.Has(proc.Ident{PID: st.PID, Start: st.Start + 1}) {
		t.Error("a member's pid with another start time counts")
	}
	self, _ := proc.Self()
	if p.Has(self) {
		t.Error("the test process (the launcher, not a member) counts")
	}
}
