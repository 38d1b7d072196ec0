// device_test.go tests the device-holder scan with a fake "device" (a plain
// file in a temp dir) held open by marked child processes, the baseline,
// the bounded wait, and the fdinfo/cmdline/status parsing on fixtures.
package device

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/cprog"
	"github.com/gpu-hold/gpu-hold/internal/mark"
	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/testenv"
)

// testMark is the environment entry that marks a process these tests
// start (as test/harness_test.go does), fresh for each.
func testMark() string { return mark.Env + "=" + mark.New() }

// fakeDevice creates a plain file standing for a device node.
func fakeDevice(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fakedev0")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// holdOpen starts a marked `sleep` that has path open as fd 3, and returns
// it with its identity. It is killed (our own child: Go signals through a
// pidfd) when the test ends.
func holdOpen(t *testing.T, path string) (*exec.Cmd, proc.Ident) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close() // the test process keeps no fd on it of its own
	cmd := exec.Command("sleep", "60")
	cmd.Env = append(os.Environ(), testMark())
	cmd.ExtraFiles = []*os.File{f}
	if err := cmd.Start(); err != nil { // returns after the exec: fd 3 is there
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	// Start returns once the exec is past its point of no return, a moment
	// before the new program's argv is in place: wait for it, or a scan
	// may see the holder with no command yet.
	for deadline := time.Now().Add(5 * time.Second); len(proc.Cmdline(cmd.Process.Pid, 4, 64)) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("sleep (pid %d) has no argv 5 s after its start", cmd.Process.Pid)
		}
	}
	st, err := proc.ReadStat(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	return cmd, st.Ident
}

func idents(hs []Holder) []proc.Ident {
	var out []proc.Ident
	for _, h := range hs {
		out = append(out, h.Ident)
	}
	return out
}

func TestScanFindsHolderByIdentity(t *testing.T) {
	dev := fakeDevice(t)
	// The test itself holds the device too: the caller is never reported.
	self, err := os.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer self.Close()
	_, id := holdOpen(t, dev)

	for _, pattern := range []string{dev, filepath.Join(filepath.Dir(dev), "fakedev*")} {
		hs, err := ScanHolders([]string{pattern})
		if err != nil {
			t.Fatal(err)
		}
		if len(hs) != 1 {
			t.Fatalf("pattern %s: want exactly the child %v, got %+v", pattern, id, hs)
		}
		h := hs[0]
		if h.Ident != id || h.Node != dev || !reflect.DeepEqual(h.FDs, []int{3}) {
			t.Errorf("got %+v, want %v holding %s on fd 3", h, id, dev)
		}
		if h.UID != os.Geteuid() || !strings.HasPrefix(h.Command, "sleep 60") {
			t.Errorf("uid/command: %+v", h)
		}
		if h.DRM != nil {
			t.Errorf("a plain file has no DRM memory: %v", h.DRM)
		}
	}
	// Nothing held, nothing matched: no holders, no error.
	if hs, err := ScanHolders([]string{filepath.Join(t.TempDir(), "nothing*")}); err != nil || hs != nil {
		t.Errorf("no node: %v %v", hs, err)
	}
	if _, err := ScanHolders([]string{"/tmp/[x"}); err == nil {
		t.Error("a malformed glob must be an error")
	}
}

// A holder whose main thread has exited while another thread runs shows
// no fds, no cmdline and state Z on /proc/PID: it is found through its live
// thread, with its command.
func TestScanFindsZombieLeaderHolder(t *testing.T) {
	dev := fakeDevice(t)
	f, err := os.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := cprog.StartZombieLeader(t, []string{testMark()}, f)
	prog := cmd.Path
	st, err := proc.ReadStat(cmd.Process.Pid)
	if err != nil || st.State != 'Z' {
		t.Fatalf("test shape: %+v, %v", st, err)
	}
	hs, err := ScanHolders([]string{dev})
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 1 || hs[0].Ident != st.Ident || !reflect.DeepEqual(hs[0].FDs, []int{3}) || !strings.HasPrefix(hs[0].Command, prog) {
		t.Fatalf("want %v holding %s on fd 3 with its command, got %+v", st.Ident, dev, hs)
	}
}

// The fd is compared by what it refers to, not by the path it was opened
// by: a holder that opened the node under another name (a hard link here; a
// container's own /dev in real life) is found, and a file of the same name
// elsewhere is not confused with it.
func TestScanMatchesByInodeNotPath(t *testing.T) {
	dev := fakeDevice(t)
	alias := filepath.Join(t.TempDir(), "alias")
	if err := os.Link(dev, alias); err != nil {
		testenv.Need(t, "cannot hard-link in the temp dir: %v", err)
	}
	_, id := holdOpen(t, alias)
	other := filepath.Join(t.TempDir(), "fakedev0") // same name, another file
	if err := os.WriteFile(other, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, otherID := holdOpen(t, other)

	hs, err := ScanHolders([]string{dev})
	if err != nil {
		t.Fatal(err)
	}
	if got := idents(hs); !reflect.DeepEqual(got, []proc.Ident{id}) {
		t.Fatalf("want only %v (holds it via a hard link), got %v (the same-name file's holder is %v)", id, got, otherID)
	}
	if hs[0].Node != dev {
		t.Errorf("node reported as %q, want the configured path %q", hs[0].Node, dev)
	}
}

// Device nodes are matched by st_rdev: a node made in a temp dir for the
// same device number as /dev/null finds a process holding /dev/null.
func TestScanMatchesCharDeviceByRdev(t *testing.T) {
	node := filepath.Join(t.TempDir(), "null-alias")
	if err := unix.Mknod(node, unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3))); err != nil {
		testenv.Need(t, "cannot mknod (needs CAP_MKNOD): %v", err)
	}
	_, id := holdOpen(t, "/dev/null")
	nodes, err := Expand([]string{node})
	if err != nil || len(nodes) != 1 || nodes[0].Kind != "char" || nodes[0].Rdev != "1:3" {
		t.Fatalf("Expand: %+v %v", nodes, err)
	}
	hs, err := ScanHolders([]string{node})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hs {
		if h.Ident == id {
			if h.Node != node || !slices.Contains(h.FDs, 3) {
				t.Errorf("holder found with %+v", h)
			}
			return
		}
	}
	t.Fatalf("the holder of /dev/null %v was not found via a node with the same rdev: %v", id, idents(hs))
}

func TestExpandDevicesSkipsDirsAndDuplicates(t *testing.T) {
	dev := fakeDevice(t)
	dir := filepath.Dir(dev)
	if err := os.Mkdir(filepath.Join(dir, "fakedevdir"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(dev, link); err != nil {
		t.Fatal(err)
	}
	nodes, err := Expand([]string{filepath.Join(dir, "fakedev*"), link, filepath.Join(dir, "missing")})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 1 || nodes[0].Path != dev || nodes[0].Kind != "file" {
		t.Fatalf("want just %s, got %+v", dev, nodes)
	}
}

func TestBaselineExcludesEarlierHolders(t *testing.T) {
	dev := fakeDevice(t)
	_, early := holdOpen(t, dev)
	before, err := ScanHolders([]string{dev})
	if err != nil {
		t.Fatal(err)
	}
	base := NewBaseline(before)
	if !base.Contains(early) {
		t.Fatalf("baseline %v lacks %v", base, early)
	}
	late, lateID := holdOpen(t, dev)
	after, err := ScanHolders([]string{dev})
	if err != nil {
		t.Fatal(err)
	}
	if got := idents(base.Filter(after)); !reflect.DeepEqual(got, []proc.Ident{lateID}) {
		t.Fatalf("after the baseline want only %v, got %v (all: %v)", lateID, got, idents(after))
	}
	// Identity, not pid: the same pid with another start time is not excluded.
	reused := Holder{Ident: proc.Ident{PID: early.PID, Start: early.Start + 1}}
	if len(base.Filter([]Holder{reused})) != 1 {
		t.Error("a reused pid must not be excluded by the baseline")
	}
	var zero Baseline
	if len(zero.Filter(after)) != 2 {
		t.Error("the zero Baseline must exclude nothing")
	}

	// Wait: the late holder exits during the wait; the baseline one stays.
	go func() {
		time.Sleep(100 * time.Millisecond)
		late.Process.Kill()
	}()
	t0 := time.Now()
	left, err := WaitHolders(context.Background(), []string{dev}, base, 20*time.Second)
	if err != nil || left != nil {
		t.Fatalf("wait: left %v, err %v", left, err)
	}
	if d := time.Since(t0); d > 10*time.Second {
		t.Errorf("the wait did not end when the holder exited (took %v)", d)
	}
}

func TestWaitDeviceHoldersBoundAndContext(t *testing.T) {
	dev := fakeDevice(t)
	_, id := holdOpen(t, dev)
	left, err := WaitHolders(context.Background(), []string{dev}, nil, 300*time.Millisecond)
	if err != nil || !reflect.DeepEqual(idents(left), []proc.Ident{id}) {
		t.Fatalf("bound passed: want %v left, got %v, %v", id, idents(left), err)
	}
	left, err = WaitHolders(context.Background(), []string{dev}, nil, 0)
	if err != nil || len(left) != 1 {
		t.Fatalf("bound 0 scans once: %v %v", left, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	t0 := time.Now()
	left, err = WaitHolders(ctx, []string{dev}, nil, time.Minute)
	if !errors.Is(err, context.Canceled) || len(left) != 1 {
		t.Fatalf("cancelled: want the holder and context.Canceled, got %v, %v", left, err)
	}
	if d := time.Since(t0); d > 10*time.Second {
		t.Errorf("the wait ignored ctx (took %v)", d)
	}
}

func TestCheckDeviceHoldersPolicy(t *testing.T) {
	dev := fakeDevice(t)
	_, id := holdOpen(t, dev)
	for _, tc := range []struct {
		p      Policy
		failed bool
	}{{PolicyWarn, false}, {PolicyWait, false}, {PolicyFail, true}} {
		c, err := CheckHolders(context.Background(), tc.p, []string{dev}, nil, 50*time.Millisecond)
		if err != nil || len(c.Holders) != 1 || c.Holders[0].Ident != id {
			t.Fatalf("%s: %+v %v", tc.p, c, err)
		}
		if c.Failed() != tc.failed {
			t.Errorf("%s: failed %v, want %v", tc.p, c.Failed(), tc.failed)
		}
	}
	c, err := CheckHolders(context.Background(), PolicyFail, []string{dev}, NewBaseline([]Holder{{Ident: id}}), time.Second)
	if err != nil || len(c.Holders) != 0 || c.Failed() {
		t.Errorf("a baseline holder must not fail the hold: %+v %v", c, err)
	}
}

func TestParsePolicy(t *testing.T) {
	for in, want := range map[string]Policy{"": PolicyWarn, "warn": PolicyWarn, "wait": PolicyWait, "fail": PolicyFail} {
		if got, err := ParsePolicy(in); err != nil || got != want {
			t.Errorf("%q: %v %v", in, got, err)
		}
	}
	var p Policy
	if err := p.Set("Fail"); err == nil || !strings.Contains(err.Error(), "warn, wait, fail") {
		t.Errorf("bad value: %v", err)
	}
	if err := p.Set("wait"); err != nil || p != PolicyWait || p.String() != "wait" {
		t.Errorf("Set: %v %v", p, err)
	}
}

func TestDeviceHolderJSON(t *testing.T) {
	h := Holder{Ident: proc.Ident{PID: 42, Start: 7}, UID: 1000, User: "alice", Command: "python x.py",
		Node: "/dev/kfd", FDs: []int{5}, DRMDriver: "amdgpu", DRM: map[string]uint64{"memory-vram": 3 << 30}}
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"pid":42,"start":7,"uid":1000,"user":"alice","command":"python x.py","node":"/dev/kfd","fds":[5],"drm_driver":"amdgpu","drm":{"memory-vram":3221225472}}`
	if string(b) != want {
		t.Errorf("json:\n got %s\nwant %s", b, want)
	}
	if s := h.String(); s != "pid 42 (start 7) uid 1000 (alice) holds /dev/kfd: python x.py [memory-vram 3.0 GiB]" {
		t.Errorf("String: %s", s)
	}
	// Its command line is its user's text, and doctor shows it to root.
	h.Command = "x\x1b]0;PWNED\x07\x1b[2J"
	if s := h.String(); strings.ContainsAny(s, "\x1b\x07") {
		t.Errorf("String passes the command's control characters on: %q", s)
	}
}

// fdinfo of an amdgpu render node (drm-usage-stats.rst format).
const amdgpuFdinfo = `pos:	0
flags:	02100002
mnt_id:	24
ino:	1093
drm-driver:	amdgpu
drm-client-id:	14
drm-pdev:	0000:03:00.0
pasid:	32771
drm-memory-vram:	1376 KiB
drm-memory-gtt:	28 KiB
drm-memory-cpu:	0 KiB
drm-total-vram:	2 MiB
drm-resident-gtt:	4096
drm-shared-vram:	0 KiB
drm-engine-gfx:	1000 ns
drm-memory-bogus:	12 parsecs
`

func TestParseFdinfoDRM(t *testing.T) {
	info := parseFdinfoDRM([]byte(amdgpuFdinfo))
	if info.driver != "amdgpu" || info.client != "14" {
		t.Errorf("driver/client: %+v", info)
	}
	want := map[string]uint64{"memory-vram": 1376 << 10, "memory-gtt": 28 << 10, "memory-cpu": 0, "total-vram": 2 << 20, "resident-gtt": 4096}
	if !reflect.DeepEqual(info.mem, want) {
		t.Errorf("mem:\n got %v\nwant %v", info.mem, want)
	}
	if info := parseFdinfoDRM([]byte("pos:\t0\nflags:\t0100000\n")); info.mem != nil || info.driver != "" {
		t.Errorf("a plain file's fdinfo: %+v", info)
	}
}

// fakeProcDir builds a directory shaped like /proc/PID and returns a dirfd on it.
func fakeProcDir(t *testing.T, files map[string]string) int {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

func TestAddDRMCountsClientOnce(t *testing.T) {
	other := strings.Replace(amdgpuFdinfo, "drm-client-id:\t14", "drm-client-id:\t15", 1)
	dirfd := fakeProcDir(t, map[string]string{
		"fdinfo/3": amdgpuFdinfo,
		"fdinfo/4": amdgpuFdinfo, // a dup of fd 3: the same client
		"fdinfo/5": other,        // a second client
	})
	h := &Holder{FDs: []int{3, 4, 5, 6}} // fd 6 has gone
	addDRM(dirfd, h)
	if h.DRMDriver != "amdgpu" || h.DRM["memory-vram"] != 2*1376<<10 || h.DRM["total-vram"] != 2*2<<20 {
		t.Errorf("two clients, one counted twice? %+v", h)
	}
}

func TestReadCommandAndUID(t *testing.T) {
	long := strings.Repeat("x", 1000)
	dirfd := fakeProcDir(t, map[string]string{
		"cmdline": "python\x00train.py\x00--lr\x000.1\x00",
		"status":  "Name:\tpython\nUmask:\t0022\nState:\tS (sleeping)\nUid:\t1000\t1001\t1001\t1001\nGid:\t100\t100\t100\t100\n",
	})
	if got := readCommand(dirfd, "python"); got != "python train.py --lr 0.1" {
		t.Errorf("cmdline: %q", got)
	}
	if uid, ok := readEUID(dirfd); !ok || uid != 1001 {
		t.Errorf("euid: %d %v", uid, ok)
	}
	longfd := fakeProcDir(t, map[string]string{"cmdline": "run\x00" + long})
	if got := readCommand(longfd, "run"); len(got) != maxCommand+3 || !strings.HasSuffix(got, "...") {
		t.Errorf("long cmdline not bounded: %d bytes", len(got))
	}
	emptyfd := fakeProcDir(t, map[string]string{"cmdline": ""})
	if got := readCommand(emptyfd, "kworker"); got != "[kworker]" {
		t.Errorf("empty cmdline: %q", got)
	}
}
