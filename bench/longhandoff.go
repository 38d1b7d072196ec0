// longhandoff.go owns the long hand-off section: a first payload that runs
// for seconds (as any real job does), with a second hold already waiting;
// the device's idle time from the first payload's end stamp to the
// second's start stamp, per backend, beside two flock(1) holders doing the
// same.
package main

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// longFirst is how long the first payload of each pair runs.
const longFirst = 2 * time.Second

// LongHandoffMode is one way of handing off after a long payload.
type LongHandoffMode struct {
	Mode   string `json:"mode"`
	IdleMS Dist   `json:"idle_ms"`
}

func (b *bench) longHandoffSection() error {
	modes := append([]string{}, b.cfg.Backends...)
	modes = append(modes, "flock")
	idle := map[string][]float64{}
	for rep := 0; rep < b.cfg.LongReps; rep++ {
		for _, m := range modes {
			gap, err := b.longPair(m)
			if err != nil {
				return err
			}
			idle[m] = append(idle[m], gap)
		}
	}
	for _, m := range modes {
		name := "gpu-hold " + m
		if m == "flock" {
			name = "flock"
		}
		b.res.LongHandoff = append(b.res.LongHandoff, LongHandoffMode{Mode: name, IdleMS: summarize(idle[m])})
	}
	return nil
}

// longPair runs one pair and returns the idle gap (ms).
func (b *bench) longPair(mode string) (float64, error) {
	stamps := b.path("stamps")
	first := []string{"sh", "-c", fmt.Sprintf("sleep %g; exec %s", longFirst.Seconds(), strings.Join(b.helper("stamp", stamps, "a"), " "))}
	second := b.helper("stamp", stamps, "b")
	start := func(cmd []string) (*child, error) {
		if mode == "flock" {
			return b.startProc(append([]string{"flock", b.work + "/long.lock"}, cmd...), nil, nil)
		}
		return b.startHold(holdSpec{Dir: b.dir("long-" + mode), Track: mode, Grace: -1, Cmd: cmd})
	}
	a, err := start(first)
	if err != nil {
		return 0, err
	}
	time.Sleep(longFirst / 2) // the first holds; the second then waits behind it
	c, err := start(second)
	if err != nil {
		return 0, err
	}
	for _, p := range []*child{a, c} {
		if err := p.wait(time.Minute); err != nil {
			return 0, err
		}
		if p.code() != 0 {
			return 0, fmt.Errorf("long hand-off, %s: %s", mode, p.describe())
		}
	}
	st, err := readStamps(stamps)
	os.Remove(stamps)
	if err != nil {
		return 0, err
	}
	return float64(st["b"][0]-st["a"][1]) / 1e6, nil
}

// longHandoffMarkdown is the section's table.
func longHandoffMarkdown(p func(string, ...any), ms []LongHandoffMode) {
	p("")
	p("### Hand-off after a long payload")
	p("")
	p("A first payload that runs %v, a second hold already waiting behind it: the first payload's end stamp to the second's start stamp (the device's idle time between two jobs). Median [min..max] ms.", longFirst)
	p("")
	p("| chain | idle ms |")
	p("|---|---|")
	for _, m := range ms {
		p("| %s | %s |", m.Mode, m.IdleMS.String())
	}
}

// longHandoffTargets: within 2x flock's idle time, per backend.
func (b *bench) longHandoffTargets() []Target {
	var flock float64
	for _, m := range b.res.LongHandoff {
		if m.Mode == "flock" {
			flock = m.IdleMS.Median
		}
	}
	var ts []Target
	for _, m := range b.res.LongHandoff {
		if m.Mode == "flock" {
			continue
		}
		x := ratio(m.IdleMS.Median, flock)
		ts = append(ts, Target{"idle after a long payload, " + m.Mode, "<= 2x flock(1) chain",
			fmt.Sprintf("%sx (%s ms vs %s ms)", num3(x), num(m.IdleMS.Median), num(flock)), status(x <= 2)})
	}
	return ts
}
