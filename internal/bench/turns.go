// turns.go owns the turn-by-turn spawn measure of section 1: a spawner
// under a backend and an untracked one take turns, one spawn each, through
// two FIFOs, for N turns each, in one run. Both see the same machine at
// the same moments, so the ratio of their spawn times is what tracking adds
// to each spawn, free of the drift that makes separate runs on a shared VM
// differ by several percent. The hold's own work (its drains, its walks)
// slows both sides alike and is not in this ratio: the separate runs and
// the hold's CPU show it. A control run pairs two untracked spawners.
package main

import (
	"fmt"
	"strconv"
	"syscall"
	"time"
)

// TurnMode is the turn-by-turn measure of one mode (bare: the control).
type TurnMode struct {
	Mode        string `json:"mode"`
	Ratio       Num    `json:"ratio"` // median over runs of the tracked side's spawn time over the untracked side's
	Ratios      Dist   `json:"ratios"`
	TrackedMS   Dist   `json:"tracked_ms"` // the sum of the side's own spawn times
	UntrackedMS Dist   `json:"untracked_ms"`
}

// turns runs the turn-by-turn measure for the control and each
// backend, the order rotating each repeat.
func (b *bench) turns(n int) ([]TurnMode, error) {
	modes := append([]string{"bare"}, b.cfg.Backends...)
	tracked, untracked := map[string][]float64{}, map[string][]float64{}
	for rep := 0; rep < b.cfg.TurnReps; rep++ {
		for i := range modes {
			m := modes[(i+rep)%len(modes)]
			settle(10 * time.Second)
			t, u, err := b.turnOnce(m, n)
			if err != nil {
				return nil, err
			}
			tracked[m] = append(tracked[m], ms(t))
			untracked[m] = append(untracked[m], ms(u))
		}
	}
	var out []TurnMode
	for _, m := range modes {
		var rr []float64
		for i := range tracked[m] {
			rr = append(rr, ratio(tracked[m][i], untracked[m][i]))
		}
		tm := TurnMode{Mode: m, Ratios: summarize(rr), TrackedMS: summarize(tracked[m]), UntrackedMS: summarize(untracked[m])}
		tm.Ratio = Num(tm.Ratios.Median)
		out = append(out, tm)
	}
	return out, nil
}

// turnOnce runs one pair: the untracked side starts the turns; the other
// runs under mode (bare: untracked too). It returns each side's sum of
// spawn times.
func (b *bench) turnOnce(mode string, n int) (tracked, untracked time.Duration, err error) {
	toU, toT := b.path("turns-u.fifo"), b.path("turns-t.fifo")
	for _, f := range []string{toU, toT} {
		if err := syscall.Mkfifo(f, 0o600); err != nil {
			return 0, 0, fmt.Errorf("turns: cannot make FIFO %s: %v", f, err)
		}
	}
	uOut, tOut := b.path("turns-u.ns"), b.path("turns-t.ns")
	u, err := b.startProc(b.helper("alternate", strconv.Itoa(n), uOut, spawnToken, toU, toT, "1"), nil, nil)
	if err != nil {
		return 0, 0, err
	}
	targv := b.helper("alternate", strconv.Itoa(n), tOut, spawnToken, toT, toU, "0")
	var t *child
	if mode == "bare" {
		t, err = b.startProc(targv, nil, nil)
	} else {
		t, err = b.startHold(holdSpec{Dir: b.dir("turns-" + mode), Track: mode, Grace: -1, Cmd: targv})
	}
	if err != nil {
		u.wait(0) // kills the side left waiting for its peer
		return 0, 0, err
	}
	// The untracked side's last spawn comes before the other's: once that
	// one is done, this one is too (or failed with it).
	errT := t.wait(10 * time.Minute)
	errU := u.wait(10 * time.Second)
	for _, c := range []struct {
		p   *child
		err error
	}{{t, errT}, {u, errU}} {
		if c.err != nil {
			return 0, 0, c.err
		}
		if c.p.code() != 0 {
			return 0, 0, fmt.Errorf("turn-by-turn spawner (%s): %s", mode, c.p.describe())
		}
	}
	tns, err := readNS(tOut)
	if err != nil {
		return 0, 0, fmt.Errorf("turn-by-turn spawner (%s) wrote no time: %v", mode, err)
	}
	uns, err := readNS(uOut)
	if err != nil {
		return 0, 0, fmt.Errorf("turn-by-turn spawner (untracked) wrote no time: %v", err)
	}
	return time.Duration(tns), time.Duration(uns), nil
}

// turn is the turn-by-turn measure of mode (zero when not run).
func (s *SpawnResult) turn(mode string) TurnMode {
	for _, tm := range s.Turns {
		if tm.Mode == mode {
			return tm
		}
	}
	return TurnMode{Ratio: Num(nan)}
}
