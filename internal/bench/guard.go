// guard.go owns section 7: the cost of `gpu-hold guard` itself, as CPU
// time of the guard's process over a window (utime+stime from
// /proc/PID/stat), extrapolated to an hour, on this host as it is (its
// processes are what each scan reads) and on the same host while a helper
// opens the guarded node 1,000 times a second: with the scan alone (the
// default), and with --deny-at-open (the device filter runs at every open
// and streams each refusal). The guarded node is a fake one (a character
// node with a major no driver has), so the opens fail at once and add no
// driver's cost.
package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// GuardCost is one guard mode's cost.
type GuardCost struct {
	Mode        string  `json:"mode"` // scan, deny-at-open
	OpensPerSec int     `json:"opens_per_second"`
	Opened      int     `json:"opens"` // opens the helper made in the window
	Processes   int     `json:"processes"`
	PeriodS     float64 `json:"period_s"`
	WindowS     float64 `json:"window_s"`
	CPUS        Num     `json:"cpu_s"`          // the guard's user+sys over the window
	CPUPerHourS Num     `json:"cpu_s_per_hour"` // extrapolated
	CorePct     Num     `json:"core_pct"`
	Scans       Num     `json:"scans"`        // scans the guard made in all (its metrics)
	LastScanMS  Num     `json:"last_scan_ms"` // how long its last scan took
}

// guardOpenRate is the busy host's opens per second.
const guardOpenRate = 1000

func (b *bench) guardSection() error {
	window := 30 * time.Second
	if b.cfg.Quick {
		window = 5 * time.Second
	}
	qdir := b.dir("guard")
	node, err := fakeNode(b.work)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(qdir, "resources.json"), []byte(fmt.Sprintf(`{"fake": {"devices": [%q]}}`, node)), 0o644); err != nil {
		return err
	}
	for _, mode := range []string{"scan", "deny-at-open"} {
		for _, rate := range []int{0, guardOpenRate} {
			progress("guard: %s, %d opens/s, %v", mode, rate, window)
			c, err := b.guardCost(qdir, node, mode, rate, window)
			if err != nil {
				return fmt.Errorf("guard %s at %d opens/s: %w", mode, rate, err)
			}
			b.res.Guard = append(b.res.Guard, c)
		}
	}
	return nil
}

// guardCost runs one guard for window and measures it.
func (b *bench) guardCost(qdir, node, mode string, rate int, window time.Duration) (GuardCost, error) {
	period := 2 * time.Second
	mdir := b.path("guard-metrics")
	if err := os.MkdirAll(mdir, 0o755); err != nil {
		return GuardCost{}, err
	}
	args := []string{b.bin, "--dir", qdir, "--log-format", "json", "guard", "-r", "fake", "--period", period.String(), "--metrics-dir", mdir}
	if mode == "deny-at-open" {
		args = append(args, "--deny-at-open")
	}
	g, err := b.startProc(args, nil, nil)
	if err != nil {
		return GuardCost{}, err
	}
	defer func() { g.cmd.Process.Signal(syscall.SIGTERM); <-g.done }()
	if _, ok := g.waitLine("guard started", 10*time.Second); !ok {
		return GuardCost{}, fmt.Errorf("the guard did not start: %v", g.other)
	}
	var op *child
	count := b.path("opens")
	if rate > 0 {
		if op, err = b.startProc(b.helper("opener", node, strconv.Itoa(rate), count), nil, nil); err != nil {
			return GuardCost{}, err
		}
		defer func() { op.cmd.Process.Kill(); <-op.done }()
	}
	time.Sleep(period) // past the start-up and the first scan
	c0, t0 := cpuSeconds(g.cmd.Process.Pid), time.Now()
	time.Sleep(window)
	c1, el := cpuSeconds(g.cmd.Process.Pid), time.Since(t0)
	if op != nil {
		op.cmd.Process.Signal(syscall.SIGTERM)
		<-op.done
	}
	opened := 0
	if data, err := os.ReadFile(count); err == nil {
		opened, _ = strconv.Atoi(strings.TrimSpace(string(data)))
	}
	cpu := c1 - c0
	scans, last := guardScans(mdir)
	return GuardCost{Mode: mode, OpensPerSec: rate, Opened: opened, Processes: countProcs(), PeriodS: period.Seconds(), WindowS: el.Seconds(),
		CPUS: Num(cpu), CPUPerHourS: Num(cpu / el.Seconds() * 3600), CorePct: Num(100 * cpu / el.Seconds()), Scans: Num(scans), LastScanMS: Num(last * 1000)}, nil
}

// guardScans reads the guard's scan count and last scan's duration (s)
// from its textfile.
func guardScans(mdir string) (scans, last float64) {
	data, err := os.ReadFile(filepath.Join(mdir, "gpu_hold_guard.prom"))
	if err != nil {
		return nan, nan
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(data))
	if err != nil {
		return nan, nan
	}
	scans, last = nan, nan
	if f := fams["gpu_hold_guard_scans_total"]; f != nil && len(f.Metric) > 0 {
		scans = f.Metric[0].GetCounter().GetValue()
	}
	if f := fams["gpu_hold_guard_scan_seconds"]; f != nil && len(f.Metric) > 0 {
		last = f.Metric[0].GetGauge().GetValue()
	}
	return scans, last
}

// fakeNode makes a character node with a major no driver has (and a
// random minor) in dir.
func fakeNode(dir string) (string, error) {
	data, err := os.ReadFile("/proc/devices")
	if err != nil {
		return "", err
	}
	used := map[int]bool{}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				used[n] = true
			}
		}
	}
	for major := 234; major <= 254; major++ {
		if used[major] {
			continue
		}
		p := filepath.Join(dir, "fakegpu0")
		dev := (major << 8) | (rand.IntN(256)) // old encoding: minor < 256
		if err := syscall.Mknod(p, syscall.S_IFCHR|0o666, dev); err != nil {
			return "", fmt.Errorf("mknod %s: %v (the guard section needs root)", p, err)
		}
		return p, nil
	}
	return "", fmt.Errorf("no free character major in 234-254 for a fake device")
}

// countProcs is the number of processes on the host now.
func countProcs() int {
	ents, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err == nil {
			n++
		}
	}
	return n
}

// openLoop opens path rate times a second until TERM, then writes the
// count to out.
func openLoop(path string, rate int, out string) {
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, syscall.SIGTERM)
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	n := 0
	for {
		select {
		case <-sigc:
			writeFile(out, strconv.Itoa(n))
			os.Exit(0)
		case <-tick.C:
			if fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0); err == nil {
				syscall.Close(fd)
			}
			n++
		}
	}
}
