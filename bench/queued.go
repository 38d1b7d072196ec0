// queued.go owns the waiting-holds section: holdsQueued holds started at
// once behind a holder on one resource; the time until every one of them
// has logged "waiting for the token", and what each waiting hold costs the
// host meanwhile: its RSS and the kernel memory (memlock) of the BPF maps
// and programs its fds hold, read from /proc/PID/status and fdinfo.
package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// holdsQueued is how many holds wait at once.
const holdsQueued = 50

// QueuedMode is one backend's waiting holds.
type QueuedMode struct {
	Backend string `json:"backend"`
	Holds   int    `json:"holds"`
	// AllQueuedMS: the first start to the last "waiting for the token".
	AllQueuedMS float64 `json:"all_queued_ms"`
	// Per waiting hold, median over the holds.
	RSSMiB     float64 `json:"rss_mib"`
	AnonMiB    float64 `json:"rss_anon_mib"` // the part of RSS no other process shares (heap, stacks)
	MemlockMiB float64 `json:"memlock_mib"`
}

func (b *bench) queuedSection() error {
	for _, be := range b.cfg.Backends {
		m, err := b.queuedMode(be)
		if err != nil {
			return err
		}
		b.res.Queued = append(b.res.Queued, m)
	}
	return nil
}

func (b *bench) queuedMode(be string) (QueuedMode, error) {
	m := QueuedMode{Backend: be, Holds: holdsQueued}
	dir := b.dir("queued-" + be)
	ready, gate := b.path("ready"), b.path("gate")
	g, err := b.startHold(holdSpec{Dir: dir, Track: be, Grace: -1, Cmd: b.helper("gate", ready, gate)})
	if err != nil {
		return m, err
	}
	holds := []*child{}
	defer func() {
		os.WriteFile(gate, nil, 0o644)
		for _, h := range append([]*child{g}, holds...) {
			h.wait(2 * time.Minute)
		}
	}()
	if _, ok := g.waitLine("payload started", time.Minute); !ok {
		return m, fmt.Errorf("holder did not start: %s", g.describe())
	}
	t0 := time.Now()
	for i := 0; i < holdsQueued; i++ {
		h, err := b.startHold(holdSpec{Dir: dir, Track: be, Grace: -1, Cmd: []string{"true"}})
		if err != nil {
			return m, err
		}
		holds = append(holds, h)
	}
	var last time.Time
	for _, h := range holds {
		l, ok := h.waitLine("waiting for the token", time.Minute)
		if !ok {
			return m, fmt.Errorf("a hold never queued: %s", h.describe())
		}
		if l.Time.After(last) {
			last = l.Time
		}
	}
	m.AllQueuedMS = ms(last.Sub(t0))
	time.Sleep(200 * time.Millisecond) // let each settle in its wait
	var rss, anon, lock []float64
	for _, h := range holds {
		rss = append(rss, statusKiB(h.cmd.Process.Pid, "VmRSS:")/1024)
		anon = append(anon, statusKiB(h.cmd.Process.Pid, "RssAnon:")/1024)
		lock = append(lock, memlockKiB(h.cmd.Process.Pid)/1024)
	}
	m.RSSMiB, m.AnonMiB, m.MemlockMiB = summarize(rss).Median, summarize(anon).Median, summarize(lock).Median
	return m, nil
}

// statusKiB reads one kB field of /proc/PID/status.
func statusKiB(pid int, field string) float64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nan
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field); ok {
			v, _ := strconv.ParseFloat(strings.Fields(rest)[0], 64)
			return v
		}
	}
	return nan
}

// memlockKiB sums the memlock lines of the process's fds' fdinfo: what its
// BPF maps and programs hold of kernel memory.
func memlockKiB(pid int) float64 {
	fdinfo := fmt.Sprintf("/proc/%d/fdinfo", pid)
	ents, err := os.ReadDir(fdinfo)
	if err != nil {
		return nan
	}
	total := 0.0
	for _, e := range ents {
		data, err := os.ReadFile(filepath.Join(fdinfo, e.Name()))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(data), "\n") {
			if rest, ok := strings.CutPrefix(l, "memlock:"); ok {
				v, _ := strconv.ParseFloat(strings.TrimSpace(rest), 64)
				total += v / 1024
			}
		}
	}
	return total
}

// queuedMarkdown is the section's table.
func queuedMarkdown(p func(string, ...any), ms []QueuedMode) {
	p("")
	p("### Waiting holds")
	p("")
	p("%d holds (`gpu-hold -- true`) started at once behind a holder on one resource: first start to the last \"waiting for the token\", and per waiting hold (median) its RSS and the kernel memory its BPF maps and programs hold (memlock, from fdinfo).", holdsQueued)
	p("")
	p("| backend | all queued ms | RSS MiB per waiting hold | of it private (RssAnon) | kernel memlock MiB per waiting hold |")
	p("|---|---|---|---|---|")
	for _, m := range ms {
		p("| %s | %s | %s | %s | %s |", m.Backend, num(m.AllQueuedMS), num(m.RSSMiB), num(m.AnonMiB), num(m.MemlockMiB))
	}
}

// queuedTargets: all queued within 0.5 s, at most 2 MiB per waiting hold.
func (b *bench) queuedTargets() []Target {
	var ts []Target
	for _, m := range b.res.Queued {
		ts = append(ts, Target{"50 holds queued, " + m.Backend, "<= 500 ms", num(m.AllQueuedMS) + " ms", status(m.AllQueuedMS <= 500)})
		per := m.RSSMiB + m.MemlockMiB
		ts = append(ts, Target{"host memory per waiting hold, " + m.Backend, "<= 2 MiB (RSS + memlock)",
			fmt.Sprintf("%s MiB (RSS %s, of it private %s; memlock %s)", num(per), num(m.RSSMiB), num(m.AnonMiB), num(m.MemlockMiB)), status(per <= 2)})
	}
	return ts
}
