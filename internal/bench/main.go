// Command bench measures gpu-hold side by side with what it replaces (bare
// commands, flock(1) + timeout(1), the kernel's own cgroup.kill) in one run
// on one machine, and prints a markdown table (stdout) and the same numbers
// as JSON (-out): spawn overhead and completeness per tracker backend,
// teardown at scale, fork storm, hand-off, end to end and footprint (issue
// #7). Every process it starts carries GPU_HOLD_BENCH_MARK in its
// environment, and only marked leftovers are ever killed. main.go owns the
// flags, the configuration and the order of the sections.
//
//	go run ./internal/bench -bin bin/gpu-hold -out internal/bench/results.json [-quick] [-sections spawn,teardown]
package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// markEnv is the environment variable every process the bench starts carries.
const markEnv = "GPU_HOLD_BENCH_MARK"

var nan = math.NaN()

// allSections in the order they run.
var allSections = []string{"spawn", "e2e", "handoff", "teardown", "storm", "footprint", "pool", "guard", "busy", "queued", "longhandoff"}

// config is what one run measures and how often.
type config struct {
	Quick        bool     `json:"quick"`
	Sections     []string `json:"sections"`
	Backends     []string `json:"backends"`
	Cgroup       string   `json:"cgroup"`
	SpawnSecs    float64  `json:"spawn_target_seconds"` // bare spawner run time N is sized for
	SpawnReps    int      `json:"spawn_repeats"`
	TurnReps     int      `json:"spawn_turn_repeats"`
	Sizes        []int    `json:"teardown_sizes"`
	Shapes       []string `json:"teardown_shapes"`
	Behaviors    []string `json:"teardown_behaviors"`
	TeardownReps int      `json:"teardown_repeats"`
	TargetReps   int      `json:"teardown_target_repeats"` // the TERM-ignoring trees at the largest size
	StormCap     int      `json:"storm_cap"`               // long-lived sleeps the storm keeps before forking /bin/true without pause
	StormReps    int      `json:"storm_repeats"`
	Chain        int      `json:"handoff_chain"`
	ChainReps    int      `json:"handoff_chains"`
	E2EReps      int      `json:"e2e_repeats"`
	FootprintN   int      `json:"footprint_processes"`
	BusySizes    []int    `json:"busy_sizes"` // unrelated processes on the host (busy.go)
	BusyReps     int      `json:"busy_repeats"`
	QueuedReps   int      `json:"queued_repeats"`
	LongReps     int      `json:"long_handoff_repeats"`
	LongBusyReps int      `json:"long_handoff_busy_repeats"` // enough that one of the busy host's hiccups (100-300 ms) does not move the median
}

// bench is one run's state.
type bench struct {
	cfg   config
	bin   string // gpu-hold
	self  string // this binary, for helper modes
	work  string // private temp dir
	mark  string
	seq   int
	res   *Results
	cgDir string // cgroup v2 mount
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "helper" {
		helperMain(os.Args[2:])
		return
	}
	bin := flag.String("bin", "bin/gpu-hold", "gpu-hold binary to measure")
	out := flag.String("out", "internal/bench/results.json", "write the results as JSON here (\"\": do not)")
	quick := flag.Bool("quick", false, "small N and few repeats: a smoke test of about a minute")
	sections := flag.String("sections", strings.Join(allSections, ","), "sections to run, comma-separated: "+strings.Join(allSections, ","))
	backends := flag.String("backends", "proc,bpf", "tracker backends to measure")
	cgroupMode := flag.String("cgroup", "auto", "gpu-hold --cgroup for every hold")
	sizes := flag.String("sizes", "", "teardown tree sizes, comma-separated (default 10,1000,10000; -quick 10,300)")
	shapes := flag.String("shapes", "wide,bushy", "teardown tree shapes: wide (one parent, N-1 children), bushy (depth 2)")
	behaviors := flag.String("behaviors", "cooperative,term-ignoring", "teardown tree behaviours: cooperative (dies on TERM, -g 10s), term-ignoring (-g 0)")
	fpN := flag.Int("footprint-n", 0, "processes in the footprint's lineage (default 10000; -quick 1000)")
	busySizes := flag.String("busy-sizes", "", "busy-host section: unrelated processes on the host, comma-separated (default 0,5000,20000; -quick 0,500)")
	reps := flag.Int("reps", 0, "override the repeats of every section (0: the defaults)")
	flag.Parse()

	cfg := defaults(*quick)
	cfg.Sections = splitList(*sections)
	for _, s := range cfg.Sections {
		if !slices.Contains(allSections, s) {
			fatalf("unknown section %q: use some of %s", s, strings.Join(allSections, ","))
		}
	}
	cfg.Backends = splitList(*backends)
	cfg.Cgroup = *cgroupMode
	if *sizes != "" {
		cfg.Sizes = nil
		for _, s := range splitList(*sizes) {
			n, err := strconv.Atoi(s)
			if err != nil || n < 2 {
				fatalf("-sizes: %q is not a process count of at least 2", s)
			}
			cfg.Sizes = append(cfg.Sizes, n)
		}
	}
	cfg.Shapes = splitList(*shapes)
	for _, s := range cfg.Shapes {
		if s != "wide" && s != "bushy" {
			fatalf("-shapes: %q is not wide or bushy", s)
		}
	}
	cfg.Behaviors = splitList(*behaviors)
	for _, s := range cfg.Behaviors {
		if s != "cooperative" && s != "term-ignoring" {
			fatalf("-behaviors: %q is not cooperative or term-ignoring", s)
		}
	}
	if *busySizes != "" {
		cfg.BusySizes = nil
		for _, s := range splitList(*busySizes) {
			n, err := strconv.Atoi(s)
			if err != nil || n < 0 {
				fatalf("-busy-sizes: %q is not a process count", s)
			}
			cfg.BusySizes = append(cfg.BusySizes, n)
		}
	}
	if *fpN > 0 {
		cfg.FootprintN = *fpN
	}
	if *reps > 0 {
		cfg.SpawnReps, cfg.TurnReps, cfg.TeardownReps, cfg.TargetReps, cfg.StormReps, cfg.ChainReps, cfg.E2EReps, cfg.BusyReps, cfg.QueuedReps, cfg.LongReps, cfg.LongBusyReps = *reps, *reps, *reps, *reps, *reps, *reps, *reps, *reps, *reps, *reps, *reps
	}

	b, err := newBench(cfg, *bin)
	if err != nil {
		fatalf("%v", err)
	}
	code := b.run()
	if *out != "" {
		data, err := json.MarshalIndent(b.res, "", "  ")
		if err == nil {
			err = os.WriteFile(*out, append(data, '\n'), 0o644)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: cannot write %s: %v (the tables on stdout are this run's)\n", *out, err)
			code = 1
		}
	}
	os.Exit(code)
}

// defaults is the full or the quick configuration.
func defaults(quick bool) config {
	if quick {
		return config{Quick: true, SpawnSecs: 0.4, SpawnReps: 2, TurnReps: 1, Sizes: []int{10, 300}, Shapes: []string{"wide", "bushy"},
			TeardownReps: 1, TargetReps: 1, StormCap: 200, StormReps: 1, Chain: 8, ChainReps: 1, E2EReps: 4, FootprintN: 1000,
			BusySizes: []int{0, 500}, BusyReps: 2, QueuedReps: 1, LongReps: 2, LongBusyReps: 2}
	}
	return config{SpawnSecs: 2.5, SpawnReps: 11, TurnReps: 3, Sizes: []int{10, 1000, 10000}, Shapes: []string{"wide", "bushy"},
		TeardownReps: 3, TargetReps: 5, StormCap: 2000, StormReps: 5, Chain: 30, ChainReps: 2, E2EReps: 20, FootprintN: 10000,
		BusySizes: []int{0, 5000, 20000}, BusyReps: 5, QueuedReps: 3, LongReps: 5, LongBusyReps: 7}
}

func newBench(cfg config, bin string) (*bench, error) {
	abs, err := filepath.Abs(bin)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(abs); err != nil || fi.IsDir() {
		return nil, fmt.Errorf("gpu-hold binary %s not found: build it first (make build)", abs)
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	var rb [6]byte
	rand.Read(rb[:])
	mark := "bench-" + hex.EncodeToString(rb[:])
	work, err := os.MkdirTemp("", "gpu-hold-bench-")
	if err != nil {
		return nil, err
	}
	// Children inherit the marker from the bench's environment.
	os.Setenv(markEnv, mark)
	b := &bench{cfg: cfg, bin: abs, self: self, work: work, mark: mark, cgDir: "/sys/fs/cgroup/unified"}
	if _, err := os.Stat(filepath.Join(b.cgDir, "cgroup.procs")); err != nil {
		b.cgDir = "/sys/fs/cgroup"
	}
	b.res = &Results{Command: commandLine(), Config: cfg, Machine: machineInfo(), Started: time.Now()}
	return b, nil
}

// run runs the selected sections, prints the table and cleans up. It
// returns the exit code: 0, or 1 when a section failed to measure.
func (b *bench) run() int {
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-sigc
		progress("interrupted: ending marked leftovers")
		b.cleanup()
		os.Exit(130)
	}()
	defer b.cleanup()
	steps := map[string]func() error{
		"spawn": b.spawnSection, "e2e": b.e2eSection, "handoff": b.handoffSection,
		"teardown": b.teardownSection, "storm": b.stormSection, "footprint": b.footprintSection, "pool": b.poolSection,
		"guard": b.guardSection,
		"busy":  b.busySection, "queued": b.queuedSection,
		"longhandoff": b.longHandoffSection,
	}
	code := 0
	for _, s := range allSections {
		if !slices.Contains(b.cfg.Sections, s) {
			continue
		}
		if waited, quiet := settle(20 * time.Second); !quiet {
			progress("section %s: the machine did not settle in %.0fs; measuring anyway", s, waited.Seconds())
		}
		t0 := time.Now()
		progress("section %s", s)
		if err := steps[s](); err != nil {
			progress("section %s failed: %v", s, err)
			b.res.Errors = append(b.res.Errors, s+": "+err.Error())
			code = 1
		}
		progress("section %s took %.1fs", s, time.Since(t0).Seconds())
		if n := b.killMarked(); n > 0 {
			b.res.Errors = append(b.res.Errors, fmt.Sprintf("%s: %d marked processes were left alive and killed by the bench", s, n))
		}
	}
	b.res.Machine.LoadAfter = loadavg()
	b.res.Finished = time.Now()
	b.res.Targets = b.targets()
	fmt.Print(b.markdown())
	return code
}

// cleanup ends marked leftovers and removes the bench's cgroups and temp dir.
func (b *bench) cleanup() {
	b.killMarked()
	removeBenchCgroups(b.cgDir, b.mark)
	os.RemoveAll(b.work)
}

// path is a fresh path in the work dir.
func (b *bench) path(name string) string {
	b.seq++
	return filepath.Join(b.work, fmt.Sprintf("%03d-%s", b.seq, name))
}

// helper is the argv of a helper mode of this binary.
func (b *bench) helper(args ...string) []string {
	return append([]string{b.self, "helper"}, args...)
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// commandLine is how this run was started, as a user would type it.
func commandLine() string {
	return "go run ./internal/bench " + strings.Join(os.Args[1:], " ")
}

// progress reports to stderr; stdout carries only the table.
func progress(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "bench %s: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, a...))
}
