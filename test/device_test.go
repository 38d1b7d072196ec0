// device_test.go owns the tests of what a hold checks beyond its lineage:
// E16 (a process outside the lineage still holds the device after teardown,
// here a plain file standing for the device, --device FILE), the baseline of
// holders present before the grant, --device-holders wait and fail, the real
// memory floor (--mem-floor, $GPU_HOLD_MEM_ABORT_GIB) and the --metrics-dir
// textfile a hold leaves.
package test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/gpu-hold/gpu-hold/internal/proc"
)

// holderName is argv[0] of the outside holder once it holds the device.
const holderName = "gpuhold-e16-holder"

// fakeDevice makes the file that stands for the resource's device node.
func fakeDevice(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "fakedev0")
	if err := os.WriteFile(p, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	return p
}

// outside is a process started by the test, not by any hold: not in any
// hold's lineage, group or cgroup. It carries its own marker.
type outside struct {
	cmd *exec.Cmd
	id  proc.Ident
}

// startOutside starts a marked bash script outside any hold; scratch is its $GH_T.
func startOutside(t *testing.T, scratch, name, body string) *exec.Cmd {
	t.Helper()
	mark := newMark(t)
	cmd := exec.Command("bash", script(t, scratch, name, body)[1])
	cmd.Env = append(os.Environ(), markEnv+"="+mark, "GH_T="+scratch)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

// waitHolding waits until pid runs as holderName (so the command a hold
// reports is settled) and returns its identity.
func waitHolding(t *testing.T, pid int) proc.Ident {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if bytes.HasPrefix(b, []byte(holderName+"\x00")) {
			return stat(t, pid).Ident
		}
		if time.Now().After(deadline) {
			t.Fatalf("outside holder %d never ran as %s (cmdline %q)", pid, holderName, b)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// handOff arranges E16: the payload opens the device as fd 9 and hands it to
// a process outside the hold, which opens the payload's fd (through
// /proc/PID/fd/9, the same file) and keeps it; the payload then exits. It
// returns the payload and a function that, once the hold is running, waits
// for the hand-off and returns the outside holder.
func handOff(t *testing.T, scratch, dev string) ([]string, func() outside) {
	t.Helper()
	fifo := filepath.Join(scratch, "fifo")
	if err := syscall.Mkfifo(fifo, 0o666); err != nil {
		t.Fatal(err)
	}
	cmd := startOutside(t, scratch, "outside.sh", `pid=$(cat "$GH_T/fifo")
exec 3<"/proc/$pid/fd/9"
put taken $$
exec -a `+holderName+` sleep 300
`)
	payload := script(t, scratch, "payload.sh", `exec 9<"`+dev+`"
echo $$ > "$GH_T/fifo"
await go
exit 0
`)
	return payload, func() outside {
		pid := readPid(t, filepath.Join(scratch, "taken"), 20*time.Second)
		if pid != cmd.Process.Pid {
			t.Fatalf("taken by %d, want the outside process %d", pid, cmd.Process.Pid)
		}
		o := outside{cmd: cmd, id: waitHolding(t, pid)}
		if err := os.WriteFile(filepath.Join(scratch, "go"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		return o
	}
}

// reported is one device holder as the hold reported it.
type reported struct {
	PID     int    `json:"pid"`
	Start   uint64 `json:"start"`
	Command string `json:"command"`
	Node    string `json:"node"`
	line    int    // stderr line it was on
}

// holdersReported returns the device holders in the hold's warn/error log
// lines (any JSON object with pid, start and node, at any depth), and the
// line of "token released" (-1 when absent).
func holdersReported(t *testing.T, stderr string) ([]reported, int) {
	t.Helper()
	var out []reported
	released := -1
	sc := bufio.NewScanner(strings.NewReader(stderr))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 0; sc.Scan(); n++ {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) != nil {
			continue
		}
		msg := line["msg"]
		if msg == nil {
			msg = line["message"] // zerolog's default key
		}
		if msg == "token released" && released < 0 {
			released = n
		}
		if lv := line["level"]; lv != "warn" && lv != "error" {
			continue
		}
		var walk func(v any)
		walk = func(v any) {
			switch v := v.(type) {
			case map[string]any:
				_, hasPid := v["pid"]
				_, hasStart := v["start"]
				_, hasNode := v["node"]
				if hasPid && hasStart && hasNode {
					b, _ := json.Marshal(v)
					var r reported
					if json.Unmarshal(b, &r) == nil {
						r.line = n
						out = append(out, r)
					}
				}
				for _, x := range v {
					walk(x)
				}
			case []any:
				for _, x := range v {
					walk(x)
				}
			}
		}
		walk(line)
	}
	return out, released
}

// requireReported checks that o was reported holding dev, by identity and
// command, before the token was released; and that no one in not was.
func requireReported(t *testing.T, r result, o outside, dev string, not ...proc.Ident) {
	t.Helper()
	hs, released := holdersReported(t, r.Stderr)
	found := false
	for _, h := range hs {
		for _, n := range not {
			if h.PID == n.PID && h.Start == n.Start {
				t.Errorf("baseline holder %v reported as the payload's: %+v", n, h)
			}
		}
		if h.PID != o.id.PID || h.Start != o.id.Start {
			continue
		}
		found = true
		if h.Node != dev || !strings.Contains(h.Command, holderName) {
			t.Errorf("holder reported as %+v, want node %s and command %s", h, dev, holderName)
		}
		if released >= 0 && h.line > released {
			t.Errorf("holder reported on line %d, after the token was released (line %d)", h.line, released)
		}
	}
	if !found {
		t.Errorf("outside holder %v not reported (reported: %+v)\nstderr:\n%s", o.id, hs, r.Stderr)
	}
	if released < 0 {
		t.Errorf("no \"token released\" line\nstderr:\n%s", r.Stderr)
	}
}

// requireAlive checks that an outside process survived the hold: gpu-hold
// reports processes outside its lineage, it never signals them.
func requireAlive(t *testing.T, o outside) {
	t.Helper()
	if !proc.Alive(o.id) {
		t.Errorf("outside holder %v was ended by the hold: it is not the hold's to end", o.id)
	}
}

// E16: a process outside the lineage still holds the device after teardown.
//
// Catches: a release with no device check; a check that compares paths
// (the holder opened /proc/PID/fd/9, not the path); a report without pid,
// start time, command or node; a report after the release; --device not
// replacing the resource's list (the fake device is in no default list);
// a hold that kills processes outside its lineage; fail not giving 73.
// (That fail keeps the token while the holder lives is seams_devfail_test.go's.)
func TestE16OutsideHolder(t *testing.T) {
	forBackends(t, true, func(t *testing.T, rg rig) {
		for _, tc := range []struct {
			policy string
			code   int
		}{{"warn", 0}, {"fail", 73}} {
			t.Run(tc.policy, func(t *testing.T) {
				t.Parallel()
				mark := newMark(t)
				d, q := rg.dirs(t)
				dev := fakeDevice(t, d)
				payload, holder := handOff(t, d, dev)
				h := rg.start(t, q, mark, d, holdArgs(payload, "-g", "1s", "--survivor-wait", "1s",
					"--device", dev, "--device-holders", tc.policy)...)
				o := holder()
				if tc.policy == "fail" {
					endWhenKept(t, h, o) // fail keeps the token until then
				}
				r := h.Wait(30 * time.Second)
				requireEnd(t, r, tc.code, false)
				requireReported(t, r, o, dev)
				requireNoneLeft(t, mark)
				if tc.policy == "warn" {
					requireAlive(t, o)
				}
				requireReleased(t, rg, q)
			})
		}
	})
}

// A holder present before the grant (a system daemon) is a baseline: it is
// not reported as the payload's and does not fail the hold; a new holder
// beside it still is, and does.
//
// Catches: no baseline (every daemon fails every hold); a baseline by pid
// alone or by "was there at release"; a baseline that hides new holders.
func TestDeviceBaseline(t *testing.T) {
	rg := rigFor("proc")
	t.Parallel()
	t.Run("alone", func(t *testing.T) {
		mark := newMark(t)
		d, q := rg.dirs(t)
		dev := fakeDevice(t, d)
		base := startOutside(t, d, "baseline.sh", `exec 3<"`+dev+`"
exec -a `+holderName+` sleep 300
`)
		bid := waitHolding(t, base.Process.Pid)
		r := rg.start(t, q, mark, d, holdArgs([]string{"true"}, "-g", "1s", "--device", dev, "--device-holders", "fail")...).Wait(30 * time.Second)
		requireEnd(t, r, 0, false)
		hs, _ := holdersReported(t, r.Stderr)
		for _, h := range hs {
			if h.PID == bid.PID {
				t.Errorf("baseline holder reported: %+v", h)
			}
		}
		requireAlive(t, outside{id: bid})
	})
	t.Run("beside a new holder", func(t *testing.T) {
		mark := newMark(t)
		d, q := rg.dirs(t)
		dev := fakeDevice(t, d)
		base := startOutside(t, d, "baseline.sh", `exec 3<"`+dev+`"
exec -a `+holderName+` sleep 300
`)
		bid := waitHolding(t, base.Process.Pid)
		payload, holder := handOff(t, d, dev)
		h := rg.start(t, q, mark, d, holdArgs(payload, "-g", "1s", "--device", dev, "--device-holders", "fail")...)
		o := holder()
		endWhenKept(t, h, o)
		r := h.Wait(30 * time.Second)
		requireEnd(t, r, 73, false)
		requireReported(t, r, o, dev, bid)
		requireNoneLeft(t, mark)
	})
}

// --device-holders=wait: a holder that lets go within --device-wait is
// waited for, and the hold exits with the payload's own status.
//
// Catches: wait not waiting (the holder is reported as left); a wait that
// does not notice the holder leaving and runs the whole bound.
func TestDeviceHoldersWait(t *testing.T) {
	rg := rigFor("proc")
	t.Parallel()
	mark := newMark(t)
	d, q := rg.dirs(t)
	dev := fakeDevice(t, d)
	fifo := filepath.Join(d, "fifo")
	if err := syscall.Mkfifo(fifo, 0o666); err != nil {
		t.Fatal(err)
	}
	// The outside holder lets go 1.5s after it took the device.
	cmd := startOutside(t, d, "outside.sh", `pid=$(cat "$GH_T/fifo")
exec 3<"/proc/$pid/fd/9"
put taken $$
sleep 1.5
`)
	payload := script(t, d, "payload.sh", `exec 9<"`+dev+`"
echo $$ > "$GH_T/fifo"
await taken
exit 5
`)
	r := rg.start(t, q, mark, d, holdArgs(payload, "-g", "1s", "--device", dev, "--device-holders", "wait", "--device-wait", "20s")...).Wait(40 * time.Second)
	requireEnd(t, r, 5, false)
	if r.Elapsed > 15*time.Second {
		t.Errorf("the hold took %v: the wait did not end when the holder let go", r.Elapsed)
	}
	cmd.Wait()
	requireNoneLeft(t, mark)
}

// The memory floor, for real: a floor above the memory this machine has
// ends the hold at once, with the whole tree, exit 72 and a message with the
// numbers; the env var does the same; with neither nothing aborts; the flag
// wins over the env var. The metrics file counts the cause.
//
// Catches: a floor that is not watched, or only after the payload ends; a
// floor that leaves the tree running; the wrong code; an abort with no flag.
func TestMemFloor(t *testing.T) {
	forBackends(t, true, func(t *testing.T, rg rig) {
		huge := "1024T" // above any machine's MemAvailable
		t.Run("flag", func(t *testing.T) {
			t.Parallel()
			mark := newMark(t)
			d, q := rg.dirs(t)
			mdir := t.TempDir()
			payload := script(t, d, "root.sh", `
( (trap "" TERM; exec sleep 300) & wait ) &
sleep 300
`)
			h := rg.start(t, q, mark, d, holdArgs(payload, "-g", "1s", "--mem-floor", huge, "--metrics-dir", mdir)...)
			r := h.Wait(30 * time.Second)
			requireEnd(t, r, 72, false)
			if !strings.Contains(r.Stderr, "fell below the floor") {
				t.Errorf("no message with the numbers\nstderr:\n%s", r.Stderr)
			}
			if r.Elapsed > 15*time.Second {
				t.Errorf("the floor ended the hold only after %v", r.Elapsed)
			}
			requireNoneLeft(t, mark)
			requireReleased(t, rg, q)
			fams := readMetrics(t, mdir, "gpu")
			if v := sample(t, fams, "gpu_hold_exits_total", "mem-floor"); v != 1 {
				t.Errorf("exits_total{cause=mem-floor} = %v, want 1", v)
			}
		})
		t.Run("env", func(t *testing.T) {
			t.Parallel()
			mark := newMark(t)
			_, q := rg.dirs(t)
			h := newHold(t, q, mark, append(append([]string{}, rg.Track...), holdArgs([]string{"sleep", "300"}, "-g", "1s")...)...)
			h.Env = append(h.Env, "GPU_HOLD_MEM_ABORT_GIB=1000000000")
			r := h.Run(30 * time.Second)
			requireEnd(t, r, 72, false)
			requireNoneLeft(t, mark)
		})
		t.Run("none", func(t *testing.T) {
			t.Parallel()
			mark := newMark(t)
			_, q := rg.dirs(t)
			h := newHold(t, q, mark, append(append([]string{}, rg.Track...), holdArgs([]string{"sleep", "1"}, "-g", "1s")...)...)
			h.Env = append(h.Env, "GPU_HOLD_MEM_ABORT_GIB=")
			requireEnd(t, h.Run(30*time.Second), 0, false)
		})
		t.Run("flag wins", func(t *testing.T) {
			t.Parallel()
			mark := newMark(t)
			_, q := rg.dirs(t)
			h := newHold(t, q, mark, append(append([]string{}, rg.Track...), holdArgs([]string{"sleep", "1"}, "-g", "1s", "--mem-floor", "1M")...)...)
			h.Env = append(h.Env, "GPU_HOLD_MEM_ABORT_GIB=1000000000")
			requireEnd(t, h.Run(30*time.Second), 0, false)
		})
	})
}

// --metrics-dir: each hold adds to the resource's textfile, which parses
// with the Prometheus text format parser.
func TestMetricsDir(t *testing.T) {
	rg := rigFor("proc")
	t.Parallel()
	mark := newMark(t)
	_, q := rg.dirs(t)
	mdir := t.TempDir()
	for _, code := range []int{0, 3} {
		r := rg.start(t, q, mark, "", holdArgs([]string{"bash", "-c", "exit " + strconv.Itoa(code)}, "-g", "1s", "-r", "npu", "--metrics-dir", mdir)...).Wait(30 * time.Second)
		requireEnd(t, r, code, false)
	}
	fams := readMetrics(t, mdir, "npu")
	if v := sample(t, fams, "gpu_hold_holds_granted_total", ""); v != 2 {
		t.Errorf("holds_granted_total = %v, want 2", v)
	}
	if v := sample(t, fams, "gpu_hold_exits_total", "exited"); v != 2 {
		t.Errorf("exits_total{cause=exited} = %v, want 2", v)
	}
	if _, err := os.Stat(filepath.Join(mdir, "gpu_hold_gpu.prom")); err == nil {
		t.Error("a hold on npu wrote the gpu file")
	}
}

// readMetrics parses dir's textfile for resource.
func readMetrics(t *testing.T, dir, resource string) map[string]*dto.MetricFamily {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "gpu_hold_"+resource+".prom"))
	if err != nil {
		t.Fatalf("no metrics file: %v", err)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("metrics file does not parse: %v\n%s", err, data)
	}
	return fams
}

// sample returns the counter of family name (with label cause=cause when
// cause is not empty).
func sample(t *testing.T, fams map[string]*dto.MetricFamily, name, cause string) float64 {
	t.Helper()
	f := fams[name]
	if f == nil {
		t.Fatalf("no %s in the metrics file", name)
	}
	for _, m := range f.Metric {
		ok := cause == ""
		for _, l := range m.Label {
			if l.GetName() == "cause" && l.GetValue() == cause {
				ok = true
			}
		}
		if ok {
			return m.GetCounter().GetValue()
		}
	}
	t.Fatalf("%s has no sample with cause %q", name, cause)
	return 0
}
