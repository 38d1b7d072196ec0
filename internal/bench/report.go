// report.go owns the results: the JSON document, the targets of issue #7
// judged against the measured medians (every miss shown, never hidden) and
// the markdown table printed on stdout.
package main

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Results is everything one run measured (written as JSON to -out).
type Results struct {
	Command     string            `json:"command"`
	Started     time.Time         `json:"started"`
	Finished    time.Time         `json:"finished"`
	Machine     Machine           `json:"machine"`
	Config      config            `json:"config"`
	Targets     []Target          `json:"targets"`
	Spawn       *SpawnResult      `json:"spawn,omitempty"`
	E2E         *E2EResult        `json:"e2e,omitempty"`
	Handoff     *HandoffResult    `json:"handoff,omitempty"`
	Teardown    []TeardownCase    `json:"teardown,omitempty"`
	Storm       *StormResult      `json:"storm,omitempty"`
	Footprint   []FootprintMode   `json:"footprint,omitempty"`
	Pool        *PoolResult       `json:"pool,omitempty"`
	Guard       []GuardCost       `json:"guard,omitempty"`
	Busy        *BusyResult       `json:"busy,omitempty"`
	Queued      []QueuedMode      `json:"queued,omitempty"`
	LongHandoff []LongHandoffMode `json:"long_handoff,omitempty"`
	Errors      []string          `json:"errors,omitempty"`
}

// Target is one of issue #7's targets and how this run did.
type Target struct {
	Name   string `json:"name"`
	Want   string `json:"want"`
	Got    string `json:"got"`
	Status string `json:"status"` // met, missed, unresolved (above the limit within the noise), not measured
}

func status(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}

// targets judges every target the run measured.
func (b *bench) targets() []Target {
	r := b.res
	var ts []Target
	add := func(name, want, got string, ok bool) { ts = append(ts, Target{name, want, got, status(ok)}) }
	none := func(name, want, why string) { ts = append(ts, Target{name, want, why, "not measured"}) }

	if r.Spawn != nil {
		limits := map[string]float64{"bpf": 1.02, "proc": 1.10}
		for _, m := range r.Spawn.Modes {
			limit, ok := limits[m.Mode]
			if !ok {
				continue
			}
			want := fmt.Sprintf("<= %.2fx bare", limit)
			if tm := r.Spawn.turn(m.Mode); tm.Ratios.N > 0 {
				add("spawn overhead, "+m.Mode+" (turn by turn)", want,
					fmt.Sprintf("%.3fx (runs %.3f..%.3f; control %.3fx)", float64(tm.Ratio), tm.Ratios.Min, tm.Ratios.Max, float64(r.Spawn.turn("bare").Ratio)),
					float64(tm.Ratio) <= limit)
			}
			lo, hi := float64(m.RatioCI90[0]), float64(m.RatioCI90[1])
			t := Target{"spawn overhead, " + m.Mode + " (separate runs)", want,
				fmt.Sprintf("%sx (90%% CI %s..%s; repeats %s..%s)", num3(float64(m.Ratio)), num3(lo), num3(hi), num3(m.RepRatios.Min), num3(m.RepRatios.Max)),
				status(float64(m.Ratio) <= limit)}
			if t.Status == "missed" && lo <= limit {
				// Above the limit, but the runs' drift cannot tell it from
				// the limit: the turn-by-turn row is the one that can.
				t.Status = "unresolved"
			}
			ts = append(ts, t)
			if m.Mode == "bpf" {
				add("completeness, bpf", fmt.Sprintf("%d of %d, 0 lost", r.Spawn.N, r.Spawn.N),
					fmt.Sprintf("%d..%d of %d, %d lost, %d overflow, %d dropped", m.SeenMin, m.SeenMax, r.Spawn.N, m.LostEvents, m.MapOverflow, m.Dropped),
					m.SeenMin == r.Spawn.N && m.SeenMax == r.Spawn.N && m.LostEvents == 0 && m.MapOverflow == 0 && m.Dropped == 0)
			}
		}
	} else {
		none("spawn overhead and completeness", "bpf <= 1.02x, proc <= 1.10x, bpf N of N", "section not run")
	}

	if len(r.Teardown) > 0 {
		big := 0
		for _, c := range r.Teardown {
			big = max(big, c.N)
		}
		note := ""
		if big != 10000 {
			note = fmt.Sprintf(" (measured at N=%d, not 10000)", big)
		}
		for _, c := range r.Teardown {
			if c.N != big || c.Behavior != "term-ignoring" {
				continue
			}
			for _, m := range c.Modes {
				if m.Mode == "floor" || m.Mode == "pid-loop" {
					continue
				}
				add(fmt.Sprintf("teardown, %d %s TERM-ignoring, -g 0, %s", c.N, c.Shape, m.Mode), "<= 1.5x cgroup.kill floor"+note,
					fmt.Sprintf("%sx (repeats %s..%s; medians %s ms vs floor %s ms, %sx; %d leftovers)", num3(float64(m.Ratio)),
						num3(m.RepRatios.Min), num3(m.RepRatios.Max), num(m.TimeMS.Median), num(floorOf(c)), num3(float64(m.RatioOfMedians)), m.Leftovers),
					float64(m.Ratio) <= 1.5 && m.Leftovers == 0)
			}
		}
	} else {
		none("teardown at scale", "<= 1.5x cgroup.kill floor", "section not run")
	}

	if r.Storm != nil {
		for _, m := range r.Storm.Modes {
			if m.GoneMS == nil {
				continue
			}
			add("fork storm gone, "+m.Mode, "<= 1000 ms after the deadline",
				fmt.Sprintf("%s ms (max %s; %d leftovers)", num(m.GoneMS.Median), num(m.GoneMS.Max), m.Leftovers),
				m.GoneMS.N > 0 && m.GoneMS.Median <= 1000 && m.Leftovers == 0)
		}
	} else {
		none("fork storm gone", "<= 1 s", "section not run")
	}

	if r.Handoff != nil {
		for _, m := range r.Handoff.Modes {
			if m.ReleaseToStartMS == nil || strings.Contains(m.Mode, ",") {
				continue // the fleet rows (bench/fleet.go) are compared, not targeted
			}
			add("hand-off median, "+m.Mode, "<= 5 ms release to next payload start",
				fmt.Sprintf("%s ms (p99 %s)", num(m.ReleaseToStartMS.Median), num(m.ReleaseToStartMS.P99)), m.ReleaseToStartMS.Median <= 5)
		}
	} else {
		none("hand-off median", "<= 5 ms", "section not run")
	}

	// procfs's target is issue #7's, eBPF's issue #23's (its load and
	// attach timed on their own in the section's table).
	for _, be := range []string{"proc", "bpf"} {
		name := "`gpu-hold --track=" + be + " -- true`"
		if r.E2E == nil {
			none(name, "<= 3x flock+timeout+true", "section not run")
			continue
		}
		for _, m := range r.E2E.Modes {
			if m.Mode == "gpu-hold "+be {
				add(name, "<= 3x flock+timeout+true",
					fmt.Sprintf("%sx (%s ms vs %s ms)", num3(float64(m.Ratio)), num(m.WallMS.Median), num(e2eOf(r.E2E, "flock+timeout"))), float64(m.Ratio) <= 3)
			}
		}
	}
	ts = append(ts, poolTargets(r.Pool)...)
	ts = append(ts, b.busyTargets()...)
	ts = append(ts, b.queuedTargets()...)
	ts = append(ts, b.longHandoffTargets()...)
	for i := range ts {
		if strings.Contains(ts[i].Got, "n/a") && ts[i].Status == "missed" {
			ts[i].Status = "not measured"
		}
	}
	return ts
}

func floorOf(c TeardownCase) float64 {
	for _, m := range c.Modes {
		if m.Mode == "floor" {
			return m.TimeMS.Median
		}
	}
	return nan
}

func e2eOf(r *E2EResult, mode string) float64 {
	for _, m := range r.Modes {
		if m.Mode == mode {
			return m.WallMS.Median
		}
	}
	return nan
}

// num3 prints a ratio with two decimals.
func num3(x float64) string {
	if math.IsNaN(x) {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", x)
}

// cell is "median [min..max]" in ms, with an optional ratio.
func cell(d Dist, r Num) string {
	if d.N == 0 {
		return "n/a"
	}
	s := fmt.Sprintf("%s [%s..%s]", num(d.Median), num(d.Min), num(d.Max))
	if !math.IsNaN(float64(r)) {
		s += fmt.Sprintf(" (%sx)", num3(float64(r)))
	}
	return s
}

// markdown renders the whole run.
func (b *bench) markdown() string {
	r := b.res
	var w strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&w, format+"\n", a...) }
	// intro is a section's explanation, a blank line either side.
	intro := func(format string, a ...any) { p(""); p(format, a...); p("") }
	// table starts a markdown table with these column names.
	table := func(cols ...string) {
		p("| %s |", strings.Join(cols, " | "))
		p("|%s", strings.Repeat("---|", len(cols)))
	}
	m := r.Machine
	p("## gpu-hold benchmarks")
	p("")
	p("Machine: Linux %s, %d CPUs (%s), %d MiB memory, pid_max %d, RLIMIT_NOFILE %d; load %v before, %v after; %s.",
		m.Kernel, m.CPUs, m.CPUModel, m.MemTotalMB, m.PidMax, m.NoFile, m.LoadBefore, m.LoadAfter, m.GoVersion)
	p("Command: `%s` (%s, %s).", r.Command, r.Started.UTC().Format("2006-01-02 15:04 UTC"), r.Finished.Sub(r.Started).Round(time.Second))
	if r.Config.Quick {
		p("**-quick run: small N and few repeats; a smoke test, not the numbers to quote.**")
	}
	p("Times in ms as median [min..max] over repeats. Spawn overhead's and teardown's ratios are the median of per-repeat ratios (each run over the baseline run beside it in the same repeat); the others are ratios of medians.")
	p("")
	table("target", "want", "measured", "status")
	for _, t := range r.Targets {
		st := t.Status
		switch st {
		case "missed":
			st = "**MISSED**"
		case "unresolved":
			st = "unresolved: the CI holds the limit"
		}
		p("| %s | %s | %s | %s |", t.Name, t.Want, t.Got, st)
	}

	if s := r.Spawn; s != nil {
		p("")
		p("### 1-2. Spawn overhead and completeness")
		intro("A spawner fork+execs `/bin/true` N=%d times (bare rate %.0f/s); %d repeats, interleaved, the order of the modes rotating each repeat; the ratio is the median of each repeat's ratio to that repeat's bare run, the 90%% CI a bootstrap interval of that median; each run starts on a quiet machine. Loop time is the spawner's own; gpu-hold CPU is the hold process's own user+sys up to its release (the record's usage: the spawner's CPU is not in it).", s.N, s.RateHz, s.Repeats)
		table("mode", "loop ms", "ratio to bare", "90% CI", "per-repeat ratio", "gpu-hold CPU ms", "lineage saw (of N)", "lost / overflow / dropped")
		for _, sm := range s.Modes {
			seen, lost, cpu := "-", "-", "-"
			if sm.HoldCPUMS != nil {
				cpu = cell(*sm.HoldCPUMS, Num(nan))
			}
			if sm.Mode != "bare" {
				seen = fmt.Sprintf("%d..%d (%.1f%%; %d with their exec)", sm.SeenMin, sm.SeenMax, 100*float64(sm.SeenMin)/float64(s.N), sm.ExecsMin)
				lost = fmt.Sprintf("%d / %d / %d", sm.LostEvents, sm.MapOverflow, sm.Dropped)
			}
			p("| %s | %s | %s | %s..%s | %s..%s | %s | %s | %s |", sm.Mode, cell(sm.LoopMS, Num(nan)), num3(float64(sm.Ratio)),
				num3(float64(sm.RatioCI90[0])), num3(float64(sm.RatioCI90[1])), num3(sm.RepRatios.Min), num3(sm.RepRatios.Max), cpu, seen, lost)
		}
		if len(s.Turns) > 0 {
			intro("Turn by turn: a spawner under each mode and an untracked one take turns through two FIFOs, one spawn each, N spawns a side, %d runs per mode, the order rotating; each side sums its own spawn times (fork to reaped). Both sides see the machine at the same moments, so the ratio is what tracking adds to a spawn, without the drift between separate runs. The hold's own work slows both sides alike and is not in it (the gpu-hold CPU column above is). Control: both sides untracked.", s.TurnRepeats)
			table("mode", "its side ms", "untracked side ms", "ratio", "per-run ratios")
			for _, tm := range s.Turns {
				name := tm.Mode
				if name == "bare" {
					name = "control (bare)"
				}
				p("| %s | %s | %s | %.3f | %.3f..%.3f |", name, cell(tm.TrackedMS, Num(nan)), cell(tm.UntrackedMS, Num(nan)), float64(tm.Ratio), tm.Ratios.Min, tm.Ratios.Max)
			}
		}
	}

	if len(r.Teardown) > 0 {
		p("")
		p("### 3. Teardown at scale")
		p("")
		p("floor: the same tree in a bare cgroup, one write to cgroup.kill until cgroup.events says `populated 0`; pid-loop: pidfd SIGKILL per pid listed in cgroup.procs (cgroup checked), repeated until unpopulated; holds: the \"max hold reached\" log line to the hold's exit. Cooperative trees run with -g 10s, TERM-ignoring with -g 0. Every run (and every floor kill) starts on a quiet machine (CPUs 90%% idle for 0.5 s, waited for up to 10 s). In brackets: the median of each repeat's ratio to that repeat's floor. %d repeats; %d for the TERM-ignoring trees of the largest size, the ones with a target.", r.Config.TeardownReps, r.Config.TargetReps)
		p("")
		var heads []string
		for _, tm := range r.Teardown[0].Modes {
			heads = append(heads, tm.Mode)
		}
		table(append(append([]string{"tree", "behaviour", "build ms"}, heads...), "leftovers", "stale cgroups")...)
		for _, c := range r.Teardown {
			var cells []string
			left, stale := 0, 0
			for _, tm := range c.Modes {
				cells = append(cells, cell(tm.TimeMS, tm.Ratio))
				left += tm.Leftovers
				stale += tm.StaleCgroups
			}
			p("| %d %s | %s | %s | %s | %d | %d |", c.N, c.Shape, c.Behavior, num(c.BuildMS.Median), strings.Join(cells, " | "), left, stale)
		}
		intro("Holds' own teardown (the \"hold ended\" line, ms), TERM/KILL counts (processes signalled one by one: what cgroup.kill ends is not counted) and where the time went (medians, ms): start (the deadline's log line to teardown start), TERM pass (teardown start to \"TERM sent\"; with -g 0, to the first KILL), grace (to the seal and first KILL), KILL passes (to teardown end), after (teardown end to exit: record, device check, release):")
		table("tree", "behaviour", "backend", "teardown ms", "term", "kill", "start / TERM pass / grace / KILL passes / after", "lost events", "late starts")
		for _, c := range r.Teardown {
			for _, tm := range c.Modes {
				if tm.TeardownMS == nil {
					continue
				}
				ph := "n/a"
				if tm.Phases != nil {
					ph = fmt.Sprintf("%s / %s / %s / %s / %s", num(tm.Phases["start"].Median), num(tm.Phases["term"].Median), num(tm.Phases["grace"].Median), num(tm.Phases["kill"].Median), num(tm.Phases["after"].Median))
				}
				p("| %d %s | %s | %s | %s | %s | %s | %s | %d | %d |", c.N, c.Shape, c.Behavior, tm.Mode, cell(*tm.TeardownMS, Num(nan)), fmt.Sprintf("%.0f", tm.Term.Median), fmt.Sprintf("%.0f", tm.Kill.Median), ph, tm.LostEvents, tm.Late)
			}
		}
	}

	if s := r.Storm; s != nil {
		p("")
		p("### 3b. Fork storm")
		intro("%d TERM-ignoring workers fill %d long-lived sleeps, then fork+exec /bin/true without pause; holds run with -g 0. Gone: from the deadline to a /proc scan (every 10 ms) finding no marked process alive. %d repeats; build %s ms.", s.Workers, s.Cap, s.Repeats, num(s.BuildMS.Median))
		table("mode", "kill/deadline to exit ms", "deadline to nothing left ms", "marked alive at deadline", "leftovers", "stale cgroups")
		for _, sm := range s.Modes {
			gone, live := "-", "-"
			if sm.GoneMS != nil {
				gone, live = cell(*sm.GoneMS, Num(nan)), fmt.Sprintf("%.0f", sm.LiveAtDL.Median)
			}
			p("| %s | %s | %s | %s | %d | %d |", sm.Mode, cell(sm.TimeMS, Num(nan)), gone, live, sm.Leftovers, sm.StaleCgroups)
		}
	}

	if h := r.Handoff; h != nil {
		p("")
		p("### 4. Hand-off")
		intro("%d holds queued at once behind a gate on one resource (%d chain(s)), payload a stamper. release: \"token released\" log line; start: next \"payload started\" line; idle: one payload's end stamp to the next one's start stamp (the flock(1) chain's only measure). Median / p99 / max ms.", h.Chain, h.Chains)
		table("chain", "gaps", "release to next payload start", "release to next token taken", "idle (payload end to next start)")
		for _, hm := range h.Modes {
			a, c := "-", "-"
			if hm.ReleaseToStartMS != nil {
				a, c = mp(*hm.ReleaseToStartMS), mp(*hm.ReleaseToWakeMS)
			}
			p("| %s | %d | %s | %s | %s |", hm.Mode, hm.Gaps, a, c, mp(hm.IdleMS))
		}
	}

	if e := r.E2E; e != nil {
		p("")
		p("### 5. End to end")
		intro("Wall time of one command, %d repeats interleaved. startup: process start to \"waiting for the token\"; queue: to \"token taken\" (nobody else queued); launch: \"token taken\" to \"payload started\"; release: \"payload started\" to \"token released\"; exit: \"token released\" to the process's exit.", e.Repeats)
		table("command", "wall ms", "x flock+timeout", "startup ms", "queue ms", "launch ms", "release ms", "exit ms")
		for _, em := range e.Modes {
			su, q, l, rl, ex := "-", "-", "-", "-", "-"
			if em.LaunchMS != nil {
				su, q, l, rl, ex = cell(*em.StartupMS, Num(nan)), cell(*em.QueueMS, Num(nan)), cell(*em.LaunchMS, Num(nan)), cell(*em.ReleaseMS, Num(nan)), cell(*em.ExitMS, Num(nan))
			}
			p("| `%s` | %s | %s | %s | %s | %s | %s | %s |", em.Cmd, cell(em.WallMS, Num(nan)), num3(float64(em.Ratio)), su, q, l, rl, ex)
		}
		p("")
		p("eBPF tracker cost: %s ms at launch (bpf launch median minus proc launch median: a spare taken, or the programs loaded when none is there) and %s ms at startup (backend choice before queueing: bpf startup minus proc startup); bpf wall minus proc wall: %s ms.",
			num(float64(e.BPFLoadMS)), num(float64(e.BPFProbeMS)), num(float64(e.BPFExtraMS)))
		if l := e.BPFLoad; l != nil && l.Err == "" {
			p("")
			p("Load and attach on their own (in the bench process, %d each, alternating): the programs loaded and attached by a process that has not read the kernel's BTF %s ms; by one that has %s ms; a spare taken and attached %s ms.",
				l.TakeMS.N, num(float64(l.FirstLoadMS)), cell(l.LoadMS, Num(nan)), cell(l.TakeMS, Num(nan)))
		} else if l != nil {
			p("")
			p("Load and attach on their own: not measured (%s).", l.Err)
		}
	}

	if len(r.Footprint) > 0 {
		p("")
		p("### 6. Footprint")
		intro("gpu-hold holding a wide cooperative tree; \"holding\" is read from /proc/PID once the tree is complete (+1 s), idle CPU over the next seconds; peak and total are the hold's own usage up to its release, in its record (teardown included; the tree's CPU is not in it).")
		table("backend", "processes", "VmHWM holding MiB", "CPU s to hold", "idle CPU %", "peak RSS MiB", "total CPU s", "teardown ms", "BPF maps KiB")
		for _, f := range r.Footprint {
			maps := "-"
			if len(f.Maps) > 0 {
				var parts []string
				for _, mm := range f.Maps {
					parts = append(parts, fmt.Sprintf("%s %s %d", mm.Name, mm.Type, mm.MemlockKB))
				}
				maps = fmt.Sprintf("%d (%s)", f.MapsKB, strings.Join(parts, ", "))
			}
			p("| %s | %d | %s | %s | %s | %s | %s | %s | %s |", f.Backend, f.Processes, num(float64(f.HoldingHWMMB)), num(float64(f.HoldingCPUS)), num(float64(f.IdleCPUPct)), num(f.PeakRSSMB), num(f.TotalCPUS), num(float64(f.TeardownMS)), maps)
		}
		for _, f := range r.Footprint {
			if f.MapsSource != "" {
				p("")
				p("BPF maps' memory: %s.", f.MapsSource)
				break
			}
		}
	}

	poolMarkdown(p, r.Pool)
	if len(r.Guard) > 0 {
		p("")
		p("### Guard")
		intro("`gpu-hold guard -r fake --period 2s` on this host (its processes are what each scan reads), CPU time of the guard's process (user+sys) over the window, extrapolated to an hour; busy: a helper opens the guarded (fake, driverless) node 1,000 times a second. scan: the /proc fd scan alone; deny-at-open: with the device filter, which runs at every open, counts each refusal and streams each refused process to the guard at most once a second.")
		table("mode", "opens/s", "opens made", "processes at the end", "scans", "last scan ms", "window s", "guard CPU s", "CPU s per hour", "% of a core")
		for _, c := range r.Guard {
			p("| %s | %d | %d | %d | %s | %s | %s | %s | %s | %s |", c.Mode, c.OpensPerSec, c.Opened, c.Processes, num(float64(c.Scans)), num(float64(c.LastScanMS)), num(c.WindowS), num3(float64(c.CPUS)), num(float64(c.CPUPerHourS)), num3(float64(c.CorePct)))
		}
	}
	if r.Busy != nil {
		r.Busy.markdown(p, b.cfg.Backends)
	}
	if len(r.Queued) > 0 {
		queuedMarkdown(p, r.Queued)
	}
	if len(r.LongHandoff) > 0 {
		longHandoffMarkdown(p, r.LongHandoff)
	}

	if len(r.Errors) > 0 {
		p("")
		p("Errors:")
		for _, e := range r.Errors {
			p("* %s", e)
		}
	}
	return w.String()
}

// mp is "median / p99 / max".
func mp(d Dist) string {
	if d.N == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%s / %s / %s", num(d.Median), num(d.P99), num(d.Max))
}
