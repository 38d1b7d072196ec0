// handoff.go owns section 4: a chain of holds on one resource, all queued
// behind a gate hold before it lets go, each payload a stamper that writes
// its start and end times; the gaps between one hold's release and the
// next one's payload start, beside a flock(1) chain doing the same.
package main

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// HandoffMode is one chain kind.
type HandoffMode struct {
	Mode string `json:"mode"`
	Gaps int    `json:"gaps"`
	// ReleaseToStartMS: "token released" (log) to the next hold's "payload
	// started" (log). gpu-hold only.
	ReleaseToStartMS *Dist `json:"release_to_start_ms,omitempty"`
	// ReleaseToWakeMS: "token released" to the next hold's "token taken":
	// the queue's own wake-up. gpu-hold only; the log line is written just
	// after the release, so small negative values are possible.
	ReleaseToWakeMS *Dist `json:"release_to_token_ms,omitempty"`
	// IdleMS: one payload's last instruction (its end stamp) to the next
	// payload's first (its start stamp): the resource's idle time, the same
	// for gpu-hold and flock.
	IdleMS Dist `json:"idle_ms"`
}

// HandoffResult is section 4.
type HandoffResult struct {
	Chain  int           `json:"chain"`
	Chains int           `json:"chains"`
	Modes  []HandoffMode `json:"modes"`
}

func (b *bench) handoffSection() error {
	res := &HandoffResult{Chain: b.cfg.Chain, Chains: b.cfg.ChainReps}
	b.res.Handoff = res
	for _, be := range b.cfg.Backends {
		m, err := b.holdChains("gpu-hold "+be, be, b.cfg.Chain, b.cfg.ChainReps, nil)
		if err != nil {
			return err
		}
		res.Modes = append(res.Modes, m)
	}
	fleet, err := b.fleetHandoff()
	if err != nil {
		return err
	}
	res.Modes = append(res.Modes, fleet...)
	var idle []float64
	for c := 0; c < b.cfg.ChainReps; c++ {
		i, err := b.flockChain()
		if err != nil {
			return err
		}
		idle = append(idle, i...)
	}
	res.Modes = append(res.Modes, HandoffMode{Mode: "flock", Gaps: len(idle), IdleMS: summarize(idle)})
	return nil
}

// holdChains runs reps chains of n holds (env: the queue backend's) and
// sums up their gaps.
func (b *bench) holdChains(mode, be string, n, reps int, env []string) (HandoffMode, error) {
	m := HandoffMode{Mode: mode}
	var rel, wake, idle []float64
	for c := 0; c < reps; c++ {
		r, w, i, err := b.holdChain(be, n, env)
		if err != nil {
			return m, err
		}
		rel, wake, idle = append(rel, r...), append(wake, w...), append(idle, i...)
	}
	rd, wd := summarize(rel), summarize(wake)
	m.ReleaseToStartMS, m.ReleaseToWakeMS, m.IdleMS, m.Gaps = &rd, &wd, summarize(idle), len(rel)
	return m, nil
}

// holdChain runs one chain of n gpu-hold holds and returns the gaps (ms).
func (b *bench) holdChain(be string, n int, env []string) (rel, wake, idle []float64, err error) {
	b.seq++
	dir := b.dir(fmt.Sprintf("handoff-%s-%d", be, b.seq))
	stamps, ready, gate := b.path("stamps"), b.path("ready"), b.path("gate")
	g, err := b.startHold(holdSpec{Dir: dir, Track: be, Grace: -1, Env: env, Cmd: b.helper("gate", ready, gate)})
	if err != nil {
		return nil, nil, nil, err
	}
	defer func() {
		os.WriteFile(gate, nil, 0o644) // never leave the chain stuck behind the gate
		g.wait(time.Minute)
	}()
	if _, ok := g.waitLine("payload started", time.Minute); !ok {
		return nil, nil, nil, fmt.Errorf("gate hold did not start: %s", g.describe())
	}
	holds := make([]*child, n)
	for i := range holds {
		if holds[i], err = b.startHold(holdSpec{Dir: dir, Track: be, Grace: -1, Env: env, Cmd: b.helper("stamp", stamps, strconv.Itoa(i))}); err != nil {
			return nil, nil, nil, err
		}
	}
	for _, h := range holds {
		if _, ok := h.waitLine("waiting for the token", time.Minute); !ok {
			return nil, nil, nil, fmt.Errorf("a chained hold never queued: %s", h.describe())
		}
	}
	os.WriteFile(gate, nil, 0o644)
	for _, h := range append([]*child{g}, holds...) {
		if err := h.wait(5 * time.Minute); err != nil {
			return nil, nil, nil, err
		}
		if h.code() != 0 {
			return nil, nil, nil, fmt.Errorf("chained hold: %s", h.describe())
		}
	}
	st, err := readStamps(stamps)
	if err != nil {
		return nil, nil, nil, err
	}
	type link struct {
		taken, started, released time.Time
		start, end               int64 // stamps (0: the gate)
	}
	var links []link
	for i, h := range append([]*child{g}, holds...) {
		t, _ := h.line("token taken")
		s, _ := h.line("payload started")
		r, ok := h.waitLine("token released", 5*time.Second)
		if !ok {
			return nil, nil, nil, fmt.Errorf("chained hold logged no release: %s", h.describe())
		}
		l := link{taken: t.Time, started: s.Time, released: r.Time}
		if i > 0 {
			l.start, l.end = st[strconv.Itoa(i-1)][0], st[strconv.Itoa(i-1)][1]
		}
		links = append(links, l)
	}
	sort.Slice(links, func(i, j int) bool { return links[i].started.Before(links[j].started) })
	for i := 1; i < len(links); i++ {
		a, c := links[i-1], links[i]
		rel = append(rel, ms(c.started.Sub(a.released)))
		wake = append(wake, ms(c.taken.Sub(a.released)))
		if a.end > 0 && c.start > 0 {
			idle = append(idle, float64(c.start-a.end)/1e6)
		}
	}
	return rel, wake, idle, nil
}

// flockChain runs one chain of flock(1) holders and returns the idle gaps (ms).
func (b *bench) flockChain() ([]float64, error) {
	lock, stamps, ready, gate := b.path("flock.lock"), b.path("stamps"), b.path("ready"), b.path("gate")
	if err := os.WriteFile(lock, nil, 0o644); err != nil {
		return nil, err
	}
	g, err := b.startProc(append([]string{"flock", lock}, b.helper("gate", ready, gate)...), nil, nil)
	if err != nil {
		return nil, err
	}
	defer func() {
		os.WriteFile(gate, nil, 0o644)
		g.wait(time.Minute)
	}()
	if err := waitFileExists(ready, time.Minute); err != nil {
		return nil, err
	}
	holds := make([]*child, b.cfg.Chain)
	for i := range holds {
		if holds[i], err = b.startProc(append([]string{"flock", lock}, b.helper("stamp", stamps, strconv.Itoa(i))...), nil, nil); err != nil {
			return nil, err
		}
	}
	// Wait until every flock waits on the lock (blocked entries in /proc/locks).
	end := time.Now().Add(time.Minute)
	for blockedOn(lock) < b.cfg.Chain {
		if time.Now().After(end) {
			return nil, fmt.Errorf("only %d of %d flock(1) waiters blocked on the lock after a minute", blockedOn(lock), b.cfg.Chain)
		}
		time.Sleep(5 * time.Millisecond)
	}
	os.WriteFile(gate, nil, 0o644)
	for _, h := range holds {
		if err := h.wait(5 * time.Minute); err != nil {
			return nil, err
		}
		if h.code() != 0 {
			return nil, fmt.Errorf("flock chain: %s", h.describe())
		}
	}
	st, err := readStamps(stamps)
	if err != nil {
		return nil, err
	}
	var se [][2]int64
	for _, v := range st {
		se = append(se, v)
	}
	sort.Slice(se, func(i, j int) bool { return se[i][0] < se[j][0] })
	var idle []float64
	for i := 1; i < len(se); i++ {
		idle = append(idle, float64(se[i][0]-se[i-1][1])/1e6)
	}
	return idle, nil
}

// readStamps reads "ID start NS" / "ID end NS" lines into ID -> [start, end].
func readStamps(path string) (map[string][2]int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("no payload stamps: %w", err)
	}
	out := map[string][2]int64{}
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(l)
		if len(f) != 3 {
			continue
		}
		ns, _ := strconv.ParseInt(f[2], 10, 64)
		v := out[f[0]]
		if f[1] == "start" {
			v[0] = ns
		} else {
			v[1] = ns
		}
		out[f[0]] = v
	}
	return out, nil
}

// blockedOn counts the waiters blocked on path's lock in /proc/locks.
func blockedOn(path string) int {
	var st syscall.Stat_t
	if syscall.Stat(path, &st) != nil {
		return 0
	}
	ino := ":" + strconv.FormatUint(st.Ino, 10)
	data, _ := os.ReadFile("/proc/locks")
	n := 0
	for _, l := range strings.Split(string(data), "\n") {
		f := strings.Fields(l)
		if len(f) > 6 && f[1] == "->" && strings.HasSuffix(f[6], ino) {
			n++
		}
	}
	return n
}

// waitFileExists waits until path exists.
func waitFileExists(path string, limit time.Duration) error {
	end := time.Now().Add(limit)
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("%s did not appear within %v", path, limit)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
