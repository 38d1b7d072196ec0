// storm.go owns the fork storm of section 3: a TERM-ignoring payload whose
// workers fill a cap of long-lived sleeps and then fork /bin/true without
// pause, ended by the hold's deadline with --grace 0; measured from the
// "max hold reached" line to the hold's exit and to the moment a /proc scan
// finds no marked process alive, beside the same storm ended by cgroup.kill.
package main

import (
	"strconv"
	"time"
)

// stormWorkers is how many processes fork without pause.
const stormWorkers = 4

// StormMode is one way the storm was ended.
type StormMode struct {
	Mode      string `json:"mode"`
	TimeMS    Dist   `json:"time_ms"`           // floor: kill to unpopulated; holds: deadline to exit
	GoneMS    *Dist  `json:"gone_ms,omitempty"` // holds: deadline to no marked process alive
	LiveAtDL  *Dist  `json:"live_at_deadline,omitempty"`
	Leftovers int    `json:"leftovers"`
	Late      int    `json:"late_starts"`
	// StaleCgroups: holds whose cgroup outlived them (see TeardownMode).
	StaleCgroups int `json:"stale_cgroups"`
}

// StormResult is the fork storm.
type StormResult struct {
	Workers int         `json:"workers"`
	Cap     int         `json:"cap"`
	Repeats int         `json:"repeats"`
	BuildMS Dist        `json:"build_ms"`
	Modes   []StormMode `json:"modes"`
}

func (b *bench) stormSection() error {
	pl := payload{name: "storm", ignore: true, argv: func(ready string) []string {
		return b.helper("storm", strconv.Itoa(stormWorkers), strconv.Itoa(b.cfg.StormCap), "1", ready)
	}}
	res := &StormResult{Workers: stormWorkers, Cap: b.cfg.StormCap, Repeats: b.cfg.StormReps}
	b.res.Storm = res
	progress("storm: %d workers, cap %d, %d repeats", stormWorkers, b.cfg.StormCap, b.cfg.StormReps)
	times, gone, live := map[string][]float64{}, map[string][]float64{}, map[string][]float64{}
	acc := map[string]*StormMode{}
	modes := append([]string{"floor"}, b.cfg.Backends...)
	for _, m := range modes {
		acc[m] = &StormMode{Mode: m}
	}
	var builds []float64
	holdBuilds := map[string][]float64{}
	for rep := 0; rep < b.cfg.StormReps; rep++ {
		for _, m := range modes {
			if m == "floor" {
				r, err := b.floorRun(pl, "floor")
				if err != nil {
					return err
				}
				times[m] = append(times[m], ms(r.kill))
				builds = append(builds, ms(r.build))
				continue
			}
			est := 2 * time.Duration(summarize(builds).Max*float64(time.Millisecond))
			if d := summarize(holdBuilds[m]); d.N > 0 {
				est = time.Duration(d.Max * float64(time.Millisecond))
			}
			maxHold := est*6/5 + 500*time.Millisecond
			var r holdResult
			for attempt := 0; ; attempt++ {
				ok, err := b.holdOnce(pl, m, 0, maxHold, true, &r)
				if err != nil {
					return err
				}
				if ok || attempt == 2 {
					break
				}
				r.late++
				maxHold *= 2
			}
			holdBuilds[m] = append(holdBuilds[m], ms(r.buildInHold))
			times[m] = append(times[m], ms(r.toExit))
			if r.toGone >= 0 {
				gone[m] = append(gone[m], ms(r.toGone))
			}
			live[m] = append(live[m], float64(r.liveAtDL))
			acc[m].Leftovers += r.leftovers
			acc[m].Late += r.late
			acc[m].StaleCgroups += r.staleCgroup
		}
	}
	res.BuildMS = summarize(builds)
	for _, m := range modes {
		sm := acc[m]
		sm.TimeMS = summarize(times[m])
		if m != "floor" {
			g, l := summarize(gone[m]), summarize(live[m])
			sm.GoneMS, sm.LiveAtDL = &g, &l
		}
		res.Modes = append(res.Modes, *sm)
	}
	return nil
}
