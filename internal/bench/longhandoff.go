// longhandoff.go owns the long hand-off section: a first payload that runs
// for seconds (as any real job does), with a second hold already waiting;
// the device's idle time from the first payload's end stamp to the
// second's start stamp, per backend (with and without a --device check),
// beside two flock(1) holders doing the same; on the idle host, then on a
// busy one (busy.go's fillers, started once for the section).
package main

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// longFirst is how long the first payload of each pair runs.
const longFirst = 2 * time.Second

// LongHandoffMode is one way of handing off after a long payload, on one host.
type LongHandoffMode struct {
	Mode string `json:"mode"`
	// Host is "idle" or "busy"; Processes the unrelated ones on it.
	Host      string `json:"host"`
	Processes int    `json:"host_processes"`
	IdleMS    Dist   `json:"idle_ms"`
}

// longChain is one way of running a pair: flock(1), or gpu-hold with a
// backend, with or without --device (the device-holder check at the grant
// and after teardown, which a resource with devices configured runs too).
type longChain struct {
	name   string
	track  string // "": flock
	device bool
}

func (b *bench) longChains() []longChain {
	var cs []longChain
	for _, be := range b.cfg.Backends {
		cs = append(cs, longChain{"gpu-hold " + be, be, false})
	}
	for _, be := range b.cfg.Backends {
		cs = append(cs, longChain{"gpu-hold " + be + " --device", be, true})
	}
	return append(cs, longChain{"flock", "", false})
}

func (b *bench) longHandoffSection() error {
	node, err := fakeDeviceNode(b.path("fakegpu-long")) // no one holds it
	if err != nil {
		return err
	}
	if err := b.longHost(0, node); err != nil {
		return err
	}
	n := slices.Max(append([]int{0}, b.cfg.BusySizes...))
	if n == 0 {
		progress("long hand-off: -busy-sizes has no size above 0; no busy-host rows")
		return nil
	}
	fill, err := b.startFillers(n, "")
	defer fill.end()
	if err != nil {
		return err
	}
	progress("long hand-off on a busy host: %d fillers with %d fds each", n, busyFDs)
	settleFilled()
	return b.longHost(n, node)
}

// longHost runs every chain's pairs, interleaved, on the host as it is
// (n unrelated processes on it).
func (b *bench) longHost(n int, node string) error {
	host, reps := "idle", b.cfg.LongReps
	if n > 0 {
		host, reps = "busy", b.cfg.LongBusyReps
	}
	chains := b.longChains()
	idle := map[string][]float64{}
	for rep := 0; rep < reps; rep++ {
		for _, c := range chains {
			gap, err := b.longPair(c, node)
			if err != nil {
				return fmt.Errorf("%s host: %w", host, err)
			}
			idle[c.name] = append(idle[c.name], gap)
		}
	}
	for _, c := range chains {
		b.res.LongHandoff = append(b.res.LongHandoff, LongHandoffMode{Mode: c.name, Host: host, Processes: n, IdleMS: summarize(idle[c.name])})
	}
	return nil
}

// longPair runs one pair and returns the idle gap (ms).
func (b *bench) longPair(c longChain, node string) (float64, error) {
	stamps := b.path("stamps")
	first := []string{"sh", "-c", fmt.Sprintf("sleep %g; exec %s", longFirst.Seconds(), strings.Join(b.helper("stamp", stamps, "a"), " "))}
	second := b.helper("stamp", stamps, "b")
	start := func(cmd []string) (*child, error) {
		if c.track == "" {
			return b.startProc(append([]string{"flock", b.work + "/long.lock"}, cmd...), nil, nil)
		}
		args := b.holdArgs(holdSpec{Dir: b.dir("long-" + c.track), Track: c.track, Grace: -1, Cmd: cmd})
		if c.device {
			args = append([]string{"--device", node}, args...)
		}
		return b.startProc(append([]string{b.bin}, args...), nil, nil)
	}
	a, err := start(first)
	if err != nil {
		return 0, err
	}
	time.Sleep(longFirst / 2) // the first holds; the second then waits behind it
	s, err := start(second)
	if err != nil {
		return 0, err
	}
	for _, p := range []*child{a, s} {
		if err := p.wait(time.Minute); err != nil {
			return 0, err
		}
		if p.code() != 0 {
			return 0, fmt.Errorf("long hand-off, %s: %s", c.name, p.describe())
		}
	}
	st, err := readStamps(stamps)
	os.Remove(stamps)
	if err != nil {
		return 0, err
	}
	return float64(st["b"][0]-st["a"][1]) / 1e6, nil
}

// longHandoffMarkdown is the section's table: one column per host.
func longHandoffMarkdown(p func(string, ...any), ms []LongHandoffMode) {
	p("")
	p("### Hand-off after a long payload")
	p("")
	busy := 0
	var names []string
	cells := map[string]map[string]string{}
	for _, m := range ms {
		if !slices.Contains(names, m.Mode) {
			names = append(names, m.Mode)
			cells[m.Mode] = map[string]string{}
		}
		cells[m.Mode][m.Host] = m.IdleMS.String()
		if m.Host == "busy" {
			busy = m.Processes
		}
	}
	p("A first payload that runs %v, a second hold already waiting behind it: the first payload's end stamp to the second's start stamp (the device's idle time between two jobs), on the idle host and on a busy one (%d unrelated `sleep` processes with %d open files each). `--device NODE`: a fake device node no one holds, checked at the grant and after teardown as for a resource with devices. Median [min..max] ms.", longFirst, busy, busyFDs)
	p("")
	p("| chain | idle host | busy host |")
	p("|---|---|---|")
	for _, n := range names {
		busyCell := cells[n]["busy"]
		if busyCell == "" {
			busyCell = "not measured"
		}
		p("| %s | %s | %s |", n, cells[n]["idle"], busyCell)
	}
}

// longHandoffTargets: within 2x flock's idle time on the same host, per
// chain and host.
func (b *bench) longHandoffTargets() []Target {
	flock := map[string]float64{}
	for _, m := range b.res.LongHandoff {
		if m.Mode == "flock" {
			flock[m.Host] = m.IdleMS.Median
		}
	}
	var ts []Target
	for _, m := range b.res.LongHandoff {
		if m.Mode == "flock" {
			continue
		}
		host := m.Host + " host"
		if m.Host == "busy" {
			host = fmt.Sprintf("busy host (%d processes)", m.Processes)
		}
		x := ratio(m.IdleMS.Median, flock[m.Host])
		ts = append(ts, Target{"idle after a long payload, " + host + ", " + m.Mode, "<= 2x flock(1) chain on the same host",
			fmt.Sprintf("%sx (%s ms vs %s ms)", num3(x), num(m.IdleMS.Median), num(flock[m.Host])), status(x <= 2)})
	}
	if len(b.res.LongHandoff) > 0 && !slices.ContainsFunc(b.res.LongHandoff, func(m LongHandoffMode) bool { return m.Host == "busy" }) {
		ts = append(ts, Target{"idle after a long payload, busy host", "<= 2x flock(1) chain on the same host", "no busy size above 0 (-busy-sizes)", "not measured"})
	}
	return ts
}
