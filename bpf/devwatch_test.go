// devwatch_test.go tests the device watch as root with a watch of the
// test's own: every way a process can come to hold a watched device after
// the seed is found, by the openers' account where it can answer and by a
// seed where it cannot. Holders are helper processes (this test binary in
// a helper mode, marked), on a fake device node (O_PATH only) and on a
// real one (/dev/full's number, through nodes of the test's own).
package bpf

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/cgroup"
	marks "github.com/gpu-hold/gpu-hold/internal/mark"
	"github.com/gpu-hold/gpu-hold/internal/plant"
	"github.com/gpu-hold/gpu-hold/internal/testenv"

	"github.com/gpu-hold/gpu-hold/internal/teststock"
)

// fullDev is /dev/full's device number: a real device every kernel has and
// hardly any process holds.
var fullDev = Dev{Major: 1, Minor: 7}

// watchFixture is a private watch and the test's own nodes.
type watchFixture struct {
	t    *testing.T
	w    *Watch
	mark string
	dir  string
}

func newWatchFixture(t *testing.T) *watchFixture {
	t.Helper()
	testenv.NeedRoot(t, "attaching the device watch")
	mnt := cgroup.Mount()
	if mnt == "" {
		testenv.Need(t, "no cgroup v2 hierarchy to attach the device watch's open hook to")
	}
	w, err := NewPrivateWatch(mnt)
	testenv.NeedBPF(t, err)
	f := &watchFixture{t: t, w: w, mark: marks.New(), dir: t.TempDir()}
	t.Cleanup(func() { marks.Kill(f.mark); w.Close() })
	return f
}

// node makes a node of d in the fixture's directory.
func (f *watchFixture) node(name string, d Dev) string {
	p := filepath.Join(f.dir, name)
	if err := unix.Mknod(p, unix.S_IFCHR|0o600, int(unix.Mkdev(d.Major, d.Minor))); err != nil {
		f.t.Fatal(err)
	}
	return p
}

// helper starts this binary in a helper mode; it answers "ready <pid>" once
// it holds what it was asked to (the pid of the process that holds it).
func (f *watchFixture) helper(extra []*os.File, args ...string) int {
	f.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), marks.Env+"="+f.mark, watchHelperEnv+"="+strings.Join(args, "\x1f"))
	cmd.ExtraFiles = extra
	out, err := cmd.StdoutPipe()
	if err != nil {
		f.t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	var pid int
	if _, serr := fmt.Sscanf(line, "ready %d", &pid); err != nil || serr != nil {
		f.t.Fatalf("helper %q did not get ready: %q %v", args, line, err)
	}
	return pid
}

// find asks the watch and says whether pid was reported and whether it
// took a seed.
func (f *watchFixture) find(devs []Dev, paths []string, pid int) (found, seeded bool, ans WatchAnswer) {
	f.t.Helper()
	files, ans, err := f.w.Find(devs, paths)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, df := range files {
		found = found || df.PID == pid
	}
	return found, ans.Seeded, ans
}

// mustFind fails unless pid is reported; seeded says whether a seed is
// expected (-1: either).
func (f *watchFixture) mustFind(devs []Dev, paths []string, pid int, seeded int, what string) {
	f.t.Helper()
	found, s, ans := f.find(devs, paths, pid)
	if !found {
		f.t.Fatalf("%s: holder pid %d not reported (%+v)", what, pid, ans)
	}
	if seeded >= 0 && s != (seeded == 1) {
		f.t.Fatalf("%s: seeded %v, want %v (%+v)", what, s, seeded == 1, ans)
	}
}

func TestWatchSeedsThenAnswersFromOpeners(t *testing.T) {
	f := newWatchFixture(t)
	node, major := plantFake(t, f)
	devs, paths := []Dev{{Major: major, Minor: 9}}, []string{node}
	pid := f.helper(nil, "hold", node, "path")
	f.mustFind(devs, paths, pid, 1, "first check")
	f.mustFind(devs, paths, pid, 0, "second check")
	if _, ans := f.stopped(pid, devs, paths); ans.Seeded {
		t.Fatalf("a holder that exited took a seed: %+v", ans)
	}
}

// stopped kills pid's helper and checks it is reported no more.
func (f *watchFixture) stopped(pid int, devs []Dev, paths []string) (bool, WatchAnswer) {
	f.t.Helper()
	// Its pidfd polls readable once every thread has exited (and so closed
	// its files), as the teardown waits for a lineage.
	pfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		f.t.Fatal(err)
	}
	defer unix.Close(pfd)
	if !marks.Carries(pid, f.mark) {
		f.t.Fatalf("pid %d does not carry the test's mark", pid)
	}
	if err := unix.PidfdSendSignal(pfd, unix.SIGKILL, nil, 0); err != nil {
		f.t.Fatal(err)
	}
	if _, err := unix.Poll([]unix.PollFd{{Fd: int32(pfd), Events: unix.POLLIN}}, 5000); err != nil {
		f.t.Fatal(err)
	}
	found, _, ans := f.find(devs, paths, pid)
	if found {
		f.t.Fatalf("pid %d reported after it was killed", pid)
	}
	return found, ans
}

func plantFake(t *testing.T, f *watchFixture) (string, uint32) {
	node := filepath.Join(f.dir, "fakegpu")
	nf, major := plant.FakeDevice(t, node, 9)
	nf.Close()
	return node, major
}

// Every route by which a process comes to hold the device after the seed.
func TestWatchFindsHoldersAfterTheSeed(t *testing.T) {
	routes := []struct {
		name  string
		start func(f *watchFixture, checked, other string) int
	}{
		{"open-checked-node", func(f *watchFixture, checked, _ string) int { return f.helper(nil, "hold", checked, "read") }},
		{"open-other-node", func(f *watchFixture, _, other string) int { return f.helper(nil, "hold", other, "read") }},
		{"o-path-checked-node", func(f *watchFixture, checked, _ string) int { return f.helper(nil, "hold", checked, "path") }},
		{"fork-then-parent-closes", func(f *watchFixture, _, other string) int { return f.helper(nil, "forkhold", other) }},
		{"scm-rights-then-sender-closes", func(f *watchFixture, _, other string) int { return f.scm(other, false) }},
		{"scm-rights-sender-keeps", func(f *watchFixture, _, other string) int { return f.scm(other, true) }},
	}
	for _, r := range routes {
		t.Run(r.name, func(t *testing.T) {
			f := newWatchFixture(t)
			checked, other := f.node("full-a", fullDev), f.node("full-b", fullDev)
			devs, paths := []Dev{fullDev}, []string{checked}
			// Both nodes are known to the watch before the route: what
			// finds the holder is the route's own trace, not a new node.
			seedHolder := f.helper(nil, "hold", checked, "read")
			f.helper(nil, "hold", other, "read")
			f.mustFind(devs, paths, seedHolder, 1, "seed")
			f.mustFind(devs, paths, seedHolder, 0, "after the seed")
			pid := r.start(f, checked, other)
			f.mustFind(devs, paths, pid, -1, r.name)
			f.mustFind(devs, paths, pid, 0, r.name+", once learnt")
		})
	}
}

// scm starts a receiver (not an opener: it opens nothing), then a sender
// that opens other and passes it over a socket pair; the receiver's pid.
func (f *watchFixture) scm(other string, keep bool) int {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		f.t.Fatal(err)
	}
	a, b := os.NewFile(uintptr(fds[0]), "a"), os.NewFile(uintptr(fds[1]), "b")
	defer a.Close()
	defer b.Close()
	recv := f.helper([]*os.File{a}, "recv")
	if found, _, _ := f.find([]Dev{fullDev}, nil, recv); found {
		f.t.Fatalf("the receiver, pid %d, was reported before it was passed anything", recv)
	}
	mode := "close"
	if keep {
		mode = "keep"
	}
	f.helper([]*os.File{b}, "send", other, mode)
	return recv
}

func TestWatchSeedsAfterALostOpener(t *testing.T) {
	f := newWatchFixture(t)
	checked := f.node("full-a", fullDev)
	devs, paths := []Dev{fullDev}, []string{checked}
	pid := f.helper(nil, "hold", checked, "read")
	f.mustFind(devs, paths, pid, 1, "seed")
	var st devwatchWatchState
	if err := f.w.objs.State.Lookup(uint32(0), &st); err != nil {
		t.Fatal(err)
	}
	st.LostOpeners++ // as the open hook counts a full map
	if err := f.w.objs.State.Update(uint32(0), st, 0); err != nil {
		t.Fatal(err)
	}
	f.mustFind(devs, paths, pid, 1, "after a loss")
	f.mustFind(devs, paths, pid, 0, "after the reseed")
}

// ptmxDev is /dev/ptmx's number: each open is a pty whose read blocks until
// its other side writes, which no one does here.
var ptmxDev = Dev{Major: 5, Minor: 2}

// A multi-threaded holder blocked in a read of its device holds one more
// reference to the file than its fd slot (the kernel's fdget on a shared
// fd table). Where the watch has its install hooks it credits the call
// and answers from the openers; elsewhere checks of that device seed. A
// check of another device never does.
func TestWatchAnswersBesideABlockedRead(t *testing.T) {
	f := newWatchFixture(t)
	checked := f.node("full-a", fullDev)
	full, ptmx := []Dev{fullDev}, []Dev{ptmxDev}
	holder := f.helper(nil, "hold", checked, "read")
	reader := f.helper(nil, "blockread", "/dev/ptmx")
	f.mustFind(full, []string{checked}, holder, 1, "seed of /dev/full's number")
	f.mustFind(ptmx, nil, reader, 1, "seed of /dev/ptmx's number")
	credits := f.w.CreditsCalls()
	t.Logf("the watch credits sleeping calls: %v (false: the kernel refused fentry)", credits)
	seeds := 1
	if credits {
		seeds = 0
	}
	f.mustFind(ptmx, nil, reader, seeds, "a check of the blocked reader's device")
	if _, _, ans := f.find(ptmx, nil, reader); credits && ans.InFlight < 1 {
		t.Fatalf("no reference credited to the blocked read: %+v", ans)
	}
	f.mustFind(full, []string{checked}, holder, 0, "a check of another device")
}

// A thread asleep in a read of a pipe at fd N, N then pointed at the
// device's file (dup2) and the file passed to a process that opened
// nothing: the credit for the read is not that file's, and the receiver
// must be found.
func TestWatchFindsAFileBehindARepointedCall(t *testing.T) {
	f := newWatchFixture(t)
	ptmx := []Dev{ptmxDev}
	seedHolder := f.helper(nil, "blockread", "/dev/ptmx")
	f.mustFind(ptmx, nil, seedHolder, 1, "seed")
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	a, b := os.NewFile(uintptr(fds[0]), "a"), os.NewFile(uintptr(fds[1]), "b")
	defer a.Close()
	defer b.Close()
	recv := f.helper([]*os.File{a}, "recv")
	f.helper([]*os.File{b}, "repoint", "/dev/ptmx")
	f.mustFind(ptmx, nil, recv, -1, "the receiver of a file behind a repointed call")
}

// watchHelperEnv selects the helper mode (args separated by US, 0x1f).
const watchHelperEnv = "GPU_HOLD_DEVWATCH_HELPER"

func TestMain(m *testing.M) {
	if args := os.Getenv(watchHelperEnv); args != "" {
		// The runtime's first timer opens its poller (an epoll fd and an
		// eventfd): done before the helper says ready, or its fd table
		// changes under the check that follows (under TCG, often).
		time.Sleep(time.Millisecond)
		watchHelper(strings.Split(args, "\x1f"))
		return
	}
	remove := teststock.PrivateRoot()
	code := m.Run()
	remove()
	os.Exit(code)
}

// watchHelper holds what it is asked to, says "ready PID", and waits to be
// killed:
//
//	hold NODE read|path   opens NODE (O_RDONLY or O_PATH)
//	forkhold NODE         opens NODE, forks a holder, closes its own
//	send NODE close|keep  opens NODE and passes it over fd 3
//	recv                  takes a file from fd 3
//	blockread NODE        opens NODE and blocks a thread in a read of it
//	repoint NODE          blocks a thread in a read of a pipe at fd N, opens
//	                      NODE, points N at it (dup2), passes it over fd 3
//	                      and closes its own other copy
func watchHelper(args []string) {
	pid := os.Getpid()
	switch args[0] {
	case "blockread":
		if err := plant.BlockRead(args[1]); err != nil {
			helperFail(err)
		}
	case "repoint":
		repoint(args[1])
	case "hold":
		flags := unix.O_RDONLY
		if args[2] == "path" {
			flags = unix.O_PATH
		}
		mustOpen(args[1], flags)
	case "forkhold":
		fd := mustOpen(args[1], unix.O_RDONLY)
		cmd := exec.Command("sleep", "600")
		cmd.ExtraFiles = []*os.File{os.NewFile(uintptr(fd), "held")}
		if err := cmd.Start(); err != nil {
			helperFail(err)
		}
		unix.Close(fd)
		pid = cmd.Process.Pid
	case "send":
		fd := mustOpen(args[1], unix.O_RDONLY)
		if err := unix.Sendmsg(3, []byte{1}, unix.UnixRights(fd), nil, 0); err != nil {
			helperFail(err)
		}
		if _, err := unix.Read(3, make([]byte, 1)); err != nil { // the receiver has it
			helperFail(err)
		}
		if args[2] == "close" {
			unix.Close(fd)
		}
	case "recv":
		buf, oob := make([]byte, 1), make([]byte, unix.CmsgSpace(4))
		fmt.Println("ready " + strconv.Itoa(pid)) // waiting, not yet holding
		if _, _, _, _, err := unix.Recvmsg(3, buf, oob, 0); err != nil {
			helperFail(err)
		}
		if _, err := unix.Write(3, buf); err != nil {
			helperFail(err)
		}
		waitForever()
	}
	fmt.Println("ready " + strconv.Itoa(pid))
	waitForever()
}

// repoint is the helper mode of that name.
func repoint(node string) {
	var p [2]int
	if err := unix.Pipe2(p[:], 0); err != nil {
		helperFail(err)
	}
	if err := plant.BlockReadFD(p[0], "a pipe"); err != nil {
		helperFail(err)
	}
	fd := mustOpen(node, unix.O_RDWR|unix.O_NOCTTY)
	if err := unix.Dup2(fd, p[0]); err != nil {
		helperFail(err)
	}
	if err := unix.Sendmsg(3, []byte{1}, unix.UnixRights(fd), nil, 0); err != nil {
		helperFail(err)
	}
	if _, err := unix.Read(3, make([]byte, 1)); err != nil { // the receiver has it
		helperFail(err)
	}
	unix.Close(fd)
}

func mustOpen(path string, flags int) int {
	fd, err := unix.Open(path, flags, 0)
	if err != nil {
		helperFail(err)
	}
	return fd
}

func helperFail(err error) {
	fmt.Fprintln(os.Stderr, "devwatch helper:", err)
	os.Exit(1)
}

// waitForever sleeps until the test kills the helper.
func waitForever() {
	for {
		time.Sleep(time.Hour)
	}
}
