// teardown.go owns section 3: trees of N processes (wide: one parent with
// N-1 sleep children; bushy: depth 2), cooperative or TERM-ignoring, ended
// by a hold's deadline per backend (time from the "max hold reached" log
// line to the hold's exit), beside the kernel floor (the same tree in a bare
// cgroup, one write to cgroup.kill, until cgroup.events says unpopulated)
// and a careful per-pid SIGKILL loop. Repeats are interleaved across modes,
// and ratios are taken repeat by repeat.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// runEnv is the per-run marker key: every process of one payload carries
// GPU_HOLD_BENCH_RUN=<value> as well as the bench's marker.
const runEnv = "GPU_HOLD_BENCH_RUN"

// TeardownMode is one way one tree was ended.
type TeardownMode struct {
	Mode string `json:"mode"` // floor (cgroup.kill), pid-loop, proc, bpf
	// TimeMS: floor and pid-loop: first kill to unpopulated; holds: the
	// "max hold reached" log line to the hold's exit.
	TimeMS Dist `json:"time_ms"`
	// Ratio is the median of each repeat's time over that repeat's floor
	// (run beside it, so the machine's drift across the run cancels);
	// RatioOfMedians the medians' ratio, for comparison.
	Ratio          Num  `json:"ratio_to_floor"`
	RepRatios      Dist `json:"rep_ratios"`
	RatioOfMedians Num  `json:"ratio_of_medians"`
	// Holds only.
	TeardownMS *Dist `json:"teardown_field_ms,omitempty"` // the "hold ended" line's teardown
	// Phases (ms, medians over repeats), from the log and the record's
	// times: start = the "max hold reached" line to teardown start; term =
	// teardown start to the "TERM sent" line (to the first KILL with no
	// TERM pass); grace = to the record's kill_start (or teardown end
	// without KILL); kill = kill_start to teardown end; after = teardown end
	// to the hold's exit (record, device check, release).
	Phases     map[string]Dist `json:"phases_ms,omitempty"`
	Term       *Dist           `json:"term,omitempty"`
	Kill       *Dist           `json:"kill,omitempty"`
	Leftovers  int             `json:"leftovers"`   // marked processes alive after the hold exited (must be 0)
	Late       int             `json:"late_starts"` // runs repeated because the tree was not built by the deadline
	LostEvents uint64          `json:"lost_events"`
	// StaleCgroups: holds whose own cgroup still existed after they exited
	// (gpu-hold could not remove it; the bench removes it).
	StaleCgroups int `json:"stale_cgroups"`
	// Processes counted in the floor's cgroup before the kill.
	Counted int `json:"counted,omitempty"`
}

// TeardownCase is one tree.
type TeardownCase struct {
	Shape    string         `json:"shape"`
	N        int            `json:"n"`
	Behavior string         `json:"behavior"` // cooperative (-g 10s) or term-ignoring (-g 0)
	BuildMS  Dist           `json:"build_ms"` // how long the tree took to build (floor runs)
	Modes    []TeardownMode `json:"modes"`
}

// payload is something to end: a helper command line that writes a ready file.
type payload struct {
	name   string
	argv   func(ready string) []string
	ignore bool
}

func (b *bench) treePayload(shape string, n int, ignore bool) payload {
	return payload{name: fmt.Sprintf("%s-%d", shape, n), ignore: ignore, argv: func(ready string) []string {
		return b.helper("tree", shape, strconv.Itoa(n), flag01(ignore), ready)
	}}
}

func flag01(v bool) string {
	if v {
		return "1"
	}
	return "0"
}

func (b *bench) teardownSection() error {
	for _, n := range b.cfg.Sizes {
		for _, shape := range b.cfg.Shapes {
			for _, behavior := range b.cfg.Behaviors {
				ignore := behavior == "term-ignoring"
				reps := b.cfg.TeardownReps
				if ignore && n == slices.Max(b.cfg.Sizes) {
					reps = b.cfg.TargetReps // the case issue #7 sets a limit on
				}
				c, err := b.teardownCase(b.treePayload(shape, n, ignore), reps)
				if err != nil {
					return err
				}
				c.Shape, c.N = shape, n
				b.res.Teardown = append(b.res.Teardown, *c)
			}
		}
	}
	return nil
}

// teardownCase measures one payload in every mode, repeats interleaved.
func (b *bench) teardownCase(pl payload, reps int) (*TeardownCase, error) {
	c := &TeardownCase{Behavior: "cooperative"}
	grace := 10 * time.Second
	if pl.ignore {
		c.Behavior, grace = "term-ignoring", 0
	}
	progress("teardown: %s %s, %d repeats", pl.name, c.Behavior, reps)
	modes := append([]string{"floor", "pid-loop"}, b.cfg.Backends...)
	times := map[string][]float64{}
	acc := map[string]*TeardownMode{}
	for _, m := range modes {
		acc[m] = &TeardownMode{Mode: m}
	}
	var builds []float64
	holdBuilds := map[string][]float64{}
	phases := map[string]map[string][]float64{}
	var tdField, terms, kills = map[string][]float64{}, map[string][]float64{}, map[string][]float64{}
	for rep := 0; rep < reps; rep++ {
		for _, m := range modes {
			// What the last run left (init reaping its orphans, the
			// kernel freeing 10,000 processes) is not this run's cost.
			settle(10 * time.Second)
			switch m {
			case "floor", "pid-loop":
				r, err := b.floorRun(pl, m)
				if err != nil {
					return nil, err
				}
				times[m] = append(times[m], ms(r.kill))
				builds = append(builds, ms(r.build))
				acc[m].Counted = max(acc[m].Counted, r.counted)
			default:
				// A tracker slows the build (it competes for the CPUs):
				// size the max hold from this mode's own builds once known.
				est := 2 * time.Duration(summarize(builds).Max*float64(time.Millisecond))
				if d := summarize(holdBuilds[m]); d.N > 0 {
					est = time.Duration(d.Max * float64(time.Millisecond))
				}
				r, err := b.holdRun(pl, m, grace, est)
				if err != nil {
					return nil, err
				}
				times[m] = append(times[m], ms(r.toExit))
				tdField[m] = append(tdField[m], r.teardownField)
				terms[m] = append(terms[m], r.term)
				kills[m] = append(kills[m], r.kill)
				acc[m].Leftovers += r.leftovers
				acc[m].Late += r.late
				acc[m].LostEvents += r.lost
				acc[m].StaleCgroups += r.staleCgroup
				holdBuilds[m] = append(holdBuilds[m], ms(r.buildInHold))
				for k, v := range r.phases {
					if phases[m] == nil {
						phases[m] = map[string][]float64{}
					}
					phases[m][k] = append(phases[m][k], v)
				}
			}
		}
	}
	c.BuildMS = summarize(builds)
	floor := summarize(times["floor"]).Median
	for _, m := range modes {
		tm := acc[m]
		tm.TimeMS = summarize(times[m])
		tm.RepRatios = summarize(pairedRatios(times[m], times["floor"]))
		tm.Ratio = Num(tm.RepRatios.Median)
		tm.RatioOfMedians = Num(ratio(tm.TimeMS.Median, floor))
		if m != "floor" && m != "pid-loop" {
			td, te, ki := summarize(tdField[m]), summarize(terms[m]), summarize(kills[m])
			tm.TeardownMS, tm.Term, tm.Kill = &td, &te, &ki
			if len(phases[m]) > 0 {
				tm.Phases = map[string]Dist{}
				for k, v := range phases[m] {
					tm.Phases[k] = summarize(v)
				}
			}
		}
		c.Modes = append(c.Modes, *tm)
	}
	return c, nil
}

// floorResult is one bare-cgroup kill.
type floorResult struct {
	build, kill time.Duration
	counted     int
}

// floorRun builds pl in a bare cgroup and ends it with cgroup.kill (mode
// floor) or a per-pid SIGKILL loop (mode pid-loop).
func (b *bench) floorRun(pl payload, mode string) (floorResult, error) {
	var r floorResult
	cg, err := b.newBenchCgroup()
	if err != nil {
		return r, err
	}
	defer cg.remove()
	ready := b.path("ready")
	t0 := time.Now()
	p, err := b.startProc(pl.argv(ready), []string{runEnv + "=" + b.runMark()}, cg.attr())
	if err != nil {
		return r, err
	}
	defer p.wait(time.Minute)
	if err := waitFileOrExit(ready, p, 5*time.Minute); err != nil {
		return r, err
	}
	r.build = time.Since(t0)
	data, _ := os.ReadFile(cg.path + "/cgroup.procs")
	r.counted = len(strings.Fields(string(data)))
	settle(10 * time.Second) // as a hold's tree sits built until its deadline
	if mode == "floor" {
		r.kill, err = cg.killFloor(5 * time.Minute)
	} else {
		r.kill, err = cg.killLoop(5 * time.Minute)
	}
	return r, err
}

// holdResult is one hold ended by its deadline.
type holdResult struct {
	toExit        time.Duration // "max hold reached" to exit
	toGone        time.Duration // "max hold reached" to no marked process alive (when watched)
	liveAtDL      int           // marked processes alive at the deadline (when watched)
	teardownField float64
	term, kill    float64
	phases        map[string]float64
	buildInHold   time.Duration // payload started to ready
	leftovers     int
	staleCgroup   int
	late          int
	lost          uint64
	p             *child
}

// holdRun runs pl under a hold whose max hold is sized from est (the
// build time seen so far); a run whose payload was not ready by the
// deadline is repeated with twice the max hold.
func (b *bench) holdRun(pl payload, backend string, grace, est time.Duration) (holdResult, error) {
	maxHold := est*6/5 + 500*time.Millisecond // est: the slowest build seen
	var r holdResult
	for attempt := 0; attempt < 3; attempt++ {
		ok, err := b.holdOnce(pl, backend, grace, maxHold, false, &r)
		if err != nil {
			return r, err
		}
		if ok {
			return r, nil
		}
		r.late++
		maxHold *= 2
		progress("teardown: %s under %s was not built by the deadline; again with -t %v", pl.name, backend, maxHold)
	}
	return r, fmt.Errorf("%s under %s: the payload was never ready before the deadline", pl.name, backend)
}

// holdOnce runs pl once under a hold with max hold maxHold; it returns
// false when the payload was not ready by the deadline. With watch, the
// marked processes are counted from the deadline until none is left.
func (b *bench) holdOnce(pl payload, backend string, grace, maxHold time.Duration, watch bool, r *holdResult) (bool, error) {
	ready, rec, run := b.path("ready"), b.path("td-"+backend+".jsonl"), b.runMark()
	p, err := b.startHold(holdSpec{Dir: b.dir("td-" + backend), Track: backend, MaxHold: maxHold, Grace: grace,
		Dump: rec, Env: []string{runEnv + "=" + run}, Cmd: pl.argv(ready)})
	if err != nil {
		return false, err
	}
	r.p = p
	sc := newScanner(runEnv, run)
	dl, ok := p.waitLine("max hold reached", maxHold+10*time.Minute)
	if !ok {
		p.wait(5 * time.Minute)
		return false, fmt.Errorf("%s under %s: no \"max hold reached\" line: %s", pl.name, backend, p.describe())
	}
	if watch {
		first := true
		for {
			n := len(sc.live())
			if first {
				r.liveAtDL, first = n, false
			}
			if n == 0 {
				r.toGone = time.Since(dl.Time)
				break
			}
			if time.Since(dl.Time) > 5*time.Minute {
				r.toGone = -1
				break
			}
			time.Sleep(10 * time.Millisecond) // leave the CPUs to the teardown
		}
	}
	if err := p.wait(10 * time.Minute); err != nil {
		return false, err
	}
	if p.code() != 124 {
		return false, fmt.Errorf("%s under %s: exit %d, want 124 (max hold): %s", pl.name, backend, p.code(), p.describe())
	}
	r.leftovers = len(sc.live())
	if r.leftovers > 0 {
		progress("teardown: %d marked processes of %s outlived the %s hold", r.leftovers, pl.name, backend)
		killAll(sc, 30*time.Second)
	}
	readyNS, err := readNS(ready)
	if err != nil || readyNS >= dl.Time.UnixNano() {
		return false, nil
	}
	r.toExit = p.exitAt.Sub(dl.Time)
	p.waitLine("hold ended", 5*time.Second)
	r.teardownField = p.field("hold ended", "teardown")
	r.term, r.kill = p.field("hold ended", "term"), p.field("hold ended", "kill")
	if st, ok := p.line("payload started"); ok {
		r.buildInHold = time.Unix(0, readyNS).Sub(st.Time)
	}
	r.phases = nil
	r.staleCgroup = 0
	if rd, err := readRecord(rec); err == nil {
		r.staleCgroup = staleCgroup(rd.Hold.Cgroup)
		r.lost = rd.Hold.Counters.LostEvents + rd.Hold.Counters.MapOverflow
		t := rd.Hold.Times
		if !t.TeardownStart.IsZero() && !t.TeardownEnd.IsZero() {
			graceEnd := t.KillStart
			if graceEnd.IsZero() {
				graceEnd = t.TeardownEnd
			}
			// With no grace there is no TERM pass: the "TERM pass" is then
			// what came before the first KILL, and the grace is 0.
			termEnd := graceEnd
			if termSent, ok := p.line("TERM sent"); ok {
				termEnd = termSent.Time
			}
			r.phases = map[string]float64{
				"start": ms(t.TeardownStart.Sub(dl.Time)),
				"term":  ms(termEnd.Sub(t.TeardownStart)),
				"grace": ms(graceEnd.Sub(termEnd)),
				"kill":  ms(t.TeardownEnd.Sub(graceEnd)),
				"after": ms(p.exitAt.Sub(t.TeardownEnd)),
			}
		}
	}
	os.Remove(rec)
	return true, nil
}

// runMark is a fresh per-run marker value.
func (b *bench) runMark() string {
	b.seq++
	return fmt.Sprintf("%s-%d", b.mark, b.seq)
}

// readNS reads a file holding a Unix time in ns.
func readNS(path string) (int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
}

// waitFileOrExit waits until path exists; it fails early if p exits.
func waitFileOrExit(path string, p *child, limit time.Duration) error {
	end := time.Now().Add(limit)
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		select {
		case <-p.done:
			if _, err := os.Stat(path); err == nil {
				return nil
			}
			return fmt.Errorf("payload exited before it was ready: %s", p.describe())
		default:
		}
		if time.Now().After(end) {
			return fmt.Errorf("%s did not appear within %v", path, limit)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// staleCgroup reports (1) and removes a hold's cgroup that outlived the
// hold: gpu-hold removes its own at exit, so one still there is a finding.
func staleCgroup(path string) int {
	if path == "" || !strings.HasPrefix(filepath.Base(path), "gpu-hold-") {
		return 0
	}
	if _, err := os.Stat(path); err != nil {
		return 0
	}
	progress("the hold's cgroup %s outlived the hold; removing it", path)
	(&benchCgroup{path: path}).remove()
	return 1
}
