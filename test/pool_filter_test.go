// pool_filter_test.go runs real holds on a pool of real character devices
// (mknod with a major no driver has): the device a hold was given gets past
// the cgroup device filter (ENXIO, from the missing driver), the pool's
// other devices are denied (EPERM), the shared node is allowed, and without
// a cgroup the hold says that nothing keeps the payload from the others.
package test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/testenv"
)

// freeCharMajor is a character major /proc/devices does not list.
func freeCharMajor(t *testing.T) uint32 {
	t.Helper()
	f, err := os.Open("/proc/devices")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	used := map[uint32]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if sc.Text() == "Block devices:" {
			break
		}
		if n, err := strconv.ParseUint(strings.Fields(sc.Text() + " x")[0], 10, 32); err == nil {
			used[uint32(n)] = true
		}
	}
	for m := uint32(511); m > 240; m-- {
		if !used[m] {
			return m
		}
	}
	t.Fatal("no free character major in 241..511")
	return 0
}

// devNodeDir is a new directory where device nodes work: the test's temp
// dir, unless its filesystem is mounted nodev (then one under /dev).
func devNodeDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	var st unix.Statfs_t
	if unix.Statfs(d, &st) == nil && st.Flags&unix.ST_NODEV == 0 {
		return d
	}
	d, err := os.MkdirTemp("/dev", "gpu-hold-test-")
	if err != nil {
		testenv.Need(t, "%s is mounted nodev and no dir can be made under /dev: %v", t.TempDir(), err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// realPool makes n character devices and a shared node in a new dir, and a
// queue dir whose resources.json makes them the gpu pool.
func realPool(t *testing.T, n int, backfill bool) (qdir string, nodes []string, shared string) {
	t.Helper()
	testenv.NeedRoot(t, "mknod of the pool's device nodes")
	major := freeCharMajor(t)
	devdir := devNodeDir(t)
	var devs []string
	for i := range n + 1 {
		p := filepath.Join(devdir, fmt.Sprintf("fakegpu%d", i))
		if err := unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(major, uint32(i)))); err != nil {
			testenv.Need(t, "mknod %s: %v", p, err)
		}
		nodes = append(nodes, p)
		if i < n {
			devs = append(devs, fmt.Sprintf(`{"nodes": [%q], "kind": "nvidia", "uuid": "GPU-fake-%d"}`, p, i))
		}
	}
	shared, nodes = nodes[n], nodes[:n]
	qdir = t.TempDir()
	cfg := fmt.Sprintf(`{"gpu": {"devices": [], "pool": {"devices": [%s], "shared": [%q], "backfill": %v}}}`, strings.Join(devs, ", "), shared, backfill)
	if err := os.WriteFile(filepath.Join(qdir, "resources.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return qdir, nodes, shared
}

// openOutcome is what opening each node gave the payload, by path.
func openOutcomes(t *testing.T, stdout string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		if path, what, ok := strings.Cut(l, " "); ok {
			out[path] = what
		}
	}
	return out
}

// opener is a payload that tries to open each node and prints the errno.
func opener(nodes ...string) []string {
	return sh(fmt.Sprintf(`for f in %s; do
  err=$(exec 2>&1; exec 3<"$f") && echo "$f opened" || case "$err" in
    *"not permitted"*) echo "$f EPERM";; *"No such device or address"*) echo "$f ENXIO";; *"No such device"*) echo "$f ENODEV";; *) echo "$f other:$err";; esac
done; echo "env $GPU_HOLD_DEVICES $CUDA_VISIBLE_DEVICES"`, strings.Join(nodes, " ")))
}

func TestPoolDeviceFilter(t *testing.T) {
	qdir, nodes, shared := realPool(t, 3, true)
	mark := newMark(t)
	r := newHold(t, qdir, mark, append([]string{"-n", "1", "--cgroup", "on", "--"}, opener(append(nodes, shared)...)...)...).Run(60 * time.Second)
	if r.Code != 0 {
		t.Fatalf("hold exited %d:\n%s", r.Code, r.Stderr)
	}
	got := openOutcomes(t, r.Stdout)
	if got["env"] != "0 GPU-fake-0" {
		t.Fatalf("payload saw GPU_HOLD_DEVICES and CUDA_VISIBLE_DEVICES %q, want device 0", got["env"])
	}
	if w := got[nodes[0]]; w != "ENXIO" && w != "ENODEV" {
		t.Errorf("the device it was given: %s, want ENXIO/ENODEV (past the filter, no driver)\n%s", w, r.Stdout)
	}
	for _, n := range nodes[1:] {
		if w := got[n]; w != "EPERM" {
			t.Errorf("device %s it was not given: %s, want EPERM from the device filter\n%s", n, w, r.Stderr)
		}
	}
	if w := got[shared]; w != "ENXIO" && w != "ENODEV" {
		t.Errorf("the shared node: %s, want ENXIO/ENODEV (allowed)", w)
	}
	if !strings.Contains(r.Stderr, "device filter attached") {
		t.Errorf("the hold did not say it attached the filter:\n%s", r.Stderr)
	}
}

func TestPoolNoCgroupSaysSo(t *testing.T) {
	qdir, nodes, _ := realPool(t, 2, true)
	mark := newMark(t)
	r := newHold(t, qdir, mark, append([]string{"-n", "1", "--cgroup", "off", "--"}, opener(nodes...)...)...).Run(60 * time.Second)
	if r.Code != 0 {
		t.Fatalf("hold exited %d:\n%s", r.Code, r.Stderr)
	}
	if got := openOutcomes(t, r.Stdout); got[nodes[1]] != "ENXIO" && got[nodes[1]] != "ENODEV" {
		t.Errorf("without a cgroup nothing filters; the other device gave %s", got[nodes[1]])
	}
	if n := strings.Count(r.Stderr, "no device filter"); n != 1 {
		t.Errorf("the hold must say once that nothing filters the devices (said %d times):\n%s", n, r.Stderr)
	}
	recs, _ := filepath.Glob(filepath.Join(qdir, "gpu", "records", "*"))
	if len(recs) != 1 {
		t.Fatalf("records: %v", recs)
	}
	if b, _ := os.ReadFile(recs[0]); !strings.Contains(string(b), `"filter":"none: the payload has no cgroup`) {
		t.Errorf("the record does not say there was no filter:\n%s", b)
	}
}
