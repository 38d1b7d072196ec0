// spawn.go owns sections 1 and 2: a spawner that fork+execs /bin/true N
// times (N sized so the bare loop takes cfg.SpawnSecs), run bare and under
// each backend with repeats interleaved (bare, proc, bpf, bare, ...) so
// drift cancels; the spawner's own loop time is compared, and each hold's
// record is read for how many of the N processes the lineage saw.
package main

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"time"
)

// SpawnMode is one way the spawner ran.
type SpawnMode struct {
	Mode      string `json:"mode"`    // bare, proc, bpf
	LoopMS    Dist   `json:"loop_ms"` // the spawner's own loop time
	Ratio     Num    `json:"ratio"`   // median of the per-repeat ratios to bare
	RepRatios Dist   `json:"rep_ratios"`
	// RatioCI90 is a 90% bootstrap interval of that median: how far the
	// machine's drift between runs leaves it uncertain.
	RatioCI90 [2]Num `json:"ratio_ci90"`
	// HoldCPUMS (holds only): gpu-hold's own user+sys time up to its
	// release (the record's usage: the spawner's is not in it), i.e. what
	// following the spawner cost the hold.
	HoldCPUMS *Dist `json:"hold_cpu_ms,omitempty"`
	// Completeness (holds only): the fewest of N any repeat's record saw.
	SeenMin     int    `json:"seen_min,omitempty"`
	SeenMax     int    `json:"seen_max,omitempty"`
	ExecsMin    int    `json:"execs_min,omitempty"` // of those, seen with their exec of /bin/true
	LostEvents  uint64 `json:"lost_events"`
	MapOverflow uint64 `json:"map_overflow"`
	Dropped     uint64 `json:"dropped_events"`
}

// SpawnResult is sections 1 and 2.
type SpawnResult struct {
	N       int         `json:"n"`
	RateHz  float64     `json:"bare_spawn_rate_per_s"`
	Repeats int         `json:"repeats"`
	Modes   []SpawnMode `json:"modes"`
	// Turns is the turn-by-turn measure (turns.go), TurnRepeats runs of
	// N spawns a side per mode.
	TurnRepeats int        `json:"turn_repeats"`
	Turns       []TurnMode `json:"turns"`
}

const spawnToken = "gpu-hold-bench-spawn"

func (b *bench) spawnSection() error {
	// Size N from a short bare run.
	cal := 200
	if b.cfg.Quick {
		cal = 100
	}
	d, err := b.spawnOnce("bare", cal)
	if err != nil {
		return err
	}
	rate := float64(cal) / d.loop.Seconds()
	n := int(math.Round(rate*b.cfg.SpawnSecs/100)) * 100
	if n < 100 {
		n = 100
	}
	res := &SpawnResult{N: n, RateHz: math.Round(rate), Repeats: b.cfg.SpawnReps}
	b.res.Spawn = res
	progress("spawn: N=%d (bare rate %.0f/s), %d repeats", n, rate, b.cfg.SpawnReps)

	modes := append([]string{"bare"}, b.cfg.Backends...)
	loops := map[string][]float64{}
	runs := map[string][]spawnRun{}
	// The order of the modes rotates each repeat, so no mode always runs
	// right after another; each mode's ratio is the median of its ratios
	// to the bare run of the same repeat (paired, so drift between
	// repeats cancels).
	for rep := 0; rep < b.cfg.SpawnReps; rep++ {
		for i := range modes {
			m := modes[(i+rep)%len(modes)]
			settle(10 * time.Second)
			r, err := b.spawnOnce(m, n)
			if err != nil {
				return err
			}
			loops[m] = append(loops[m], ms(r.loop))
			runs[m] = append(runs[m], r)
		}
	}
	for _, m := range modes {
		rr := pairedRatios(loops[m], loops["bare"])
		sm := SpawnMode{Mode: m, LoopMS: summarize(loops[m]), RepRatios: summarize(rr)}
		sm.Ratio = Num(sm.RepRatios.Median)
		lo, hi := medianCI(rr, 0.9)
		sm.RatioCI90 = [2]Num{Num(lo), Num(hi)}
		if m != "bare" {
			sm.SeenMin, sm.ExecsMin = n+1<<30, n+1<<30
			var cpu []float64
			for _, r := range runs[m] {
				cpu = append(cpu, r.holdCPU)
				sm.SeenMin, sm.SeenMax = min(sm.SeenMin, r.seen), max(sm.SeenMax, r.seen)
				sm.ExecsMin = min(sm.ExecsMin, r.execs)
				sm.LostEvents += r.lost
				sm.MapOverflow += r.overflow
				sm.Dropped += r.dropped
			}
			c := summarize(cpu)
			sm.HoldCPUMS = &c
		}
		res.Modes = append(res.Modes, sm)
	}
	res.TurnRepeats = b.cfg.TurnReps
	progress("spawn: turn by turn, N=%d a side, %d repeats", n, b.cfg.TurnReps)
	res.Turns, err = b.turns(n)
	return err
}

// spawnRun is one spawner run.
type spawnRun struct {
	loop                    time.Duration
	holdCPU                 float64 // ms
	seen, execs             int
	lost, overflow, dropped uint64
}

// spawnOnce runs the spawner bare or under a backend.
func (b *bench) spawnOnce(mode string, n int) (spawnRun, error) {
	out := b.path("spawn.ns")
	argv := b.helper("spawn", strconv.Itoa(n), out, spawnToken)
	var r spawnRun
	var p *child
	var err error
	rec := ""
	if mode == "bare" {
		p, err = b.startProc(argv, nil, nil)
	} else {
		rec = b.path("spawn-" + mode + ".jsonl")
		p, err = b.startHold(holdSpec{Dir: b.dir("spawn-" + mode), Track: mode, Grace: -1, Dump: rec, Cmd: argv})
	}
	if err != nil {
		return r, err
	}
	if err := p.wait(10 * time.Minute); err != nil {
		return r, err
	}
	if p.code() != 0 {
		return r, fmt.Errorf("spawner (%s): %s", mode, p.describe())
	}
	ns, err := readNS(out)
	if err != nil {
		return r, fmt.Errorf("spawner (%s) wrote no time: %v; %s", mode, err, p.describe())
	}
	r.loop = time.Duration(ns)
	if rec != "" {
		rd, err := readRecord(rec)
		if err != nil {
			return r, err
		}
		r.holdCPU = rd.Hold.cpuMS()
		r.seen, r.execs = rd.spawned(spawnToken)
		r.lost, r.overflow, r.dropped = rd.Hold.Counters.LostEvents, rd.Hold.Counters.MapOverflow, rd.Hold.DroppedEvents
	}
	return r, nil
}

// dir is a queue directory for one purpose (created once, reused).
func (b *bench) dir(name string) string {
	d := b.work + "/q-" + name
	os.MkdirAll(d, 0o755)
	return d
}
