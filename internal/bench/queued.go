// queued.go owns the waiting-holds section: holdsQueued holds started at
// once behind a holder on one resource; the time until every one of them
// has logged "waiting for the token", and what each waiting hold costs the
// host meanwhile: its pages (RSS, PSS, private, from smaps_rollup), the
// kernel memory of the BPF objects its fds hold (memlock, from fdinfo) and
// what the kernel's own allocations (/proc/meminfo's Slab, KernelStack,
// PageTables) grew by from the holder alone to all of them waiting, with
// MemAvailable's drop beside it as a cross-check. The same readings over a
// second with no hold started say how much the rest of the host moves them.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// holdsQueued is how many holds wait at once.
const holdsQueued = 50

// lobbySettled: gpu-hold moves a hold that has waited 2 s with two or more
// tickets still ahead into gpu-hold-lobby; the holds are measured once
// they have waited this long (their exec into it done).
const lobbySettled = 2500 * time.Millisecond

// QueuedMode is one backend's waiting holds over the section's repeats.
// Memory is per waiting hold: a repeat's sum over the holds (or the host's
// growth) divided by their number, in MiB.
type QueuedMode struct {
	Backend string `json:"backend"`
	Holds   int    `json:"holds"`
	Repeats int    `json:"repeats"`
	// AllQueuedMS: the first start to the last "waiting for the token".
	AllQueuedMS Dist `json:"all_queued_ms"`
	// Floor*MS: as many processes started the same way, first start to
	// last exit: gpu-hold --version (the image's start alone), and the
	// smallest Go program of the build (any Go process's start).
	FloorImageMS Dist `json:"floor_image_ms"`
	FloorGoMS    Dist `json:"floor_go_ms"`
	RSSMiB       Dist `json:"rss_mib"`
	PSSMiB       Dist `json:"pss_mib"`     // shared pages divided among their sharers
	PrivateMiB   Dist `json:"private_mib"` // Private_Clean + Private_Dirty: no other process maps them
	MemlockMiB   Dist `json:"memlock_mib"` // BPF maps and programs
	// KernelMiB: growth of Slab + KernelStack + PageTables, per key in
	// KernelByKeyMiB.
	KernelMiB      Dist            `json:"kernel_growth_mib"`
	KernelByKeyMiB map[string]Dist `json:"kernel_growth_by_key_mib"`
	// OwnKernelMiB: the part of it /proc/PID/status attributes to each
	// hold (VmPTE, and a kernel stack per thread), a floor for KernelMiB.
	OwnKernelMiB Dist `json:"own_kernel_mib"`
	// HostMiB = PSS + memlock + kernel growth, per repeat: the target's measure.
	HostMiB Dist `json:"host_mib"`
	// MemAvailDropMiB: MemAvailable's drop, the cross-check.
	MemAvailDropMiB Dist `json:"mem_available_drop_mib"`
	// Drift*: the kernel growth and MemAvailable's drop over a second
	// with the holder alone, divided by the holds' number as above: what
	// the rest of the host adds to those two columns.
	DriftKernelMiB Dist `json:"drift_kernel_growth_mib"`
	DriftAvailMiB  Dist `json:"drift_mem_available_drop_mib"`
}

// queuedSample is one repeat of one backend (MiB per waiting hold).
type queuedSample struct {
	allQueuedMS, rss, pss, private, memlock, kernel, own, availDrop float64
	driftKernel, driftAvail                                         float64
	byKey                                                           map[string]float64
	floors                                                          map[string]float64 // ms, by startFloors' names
}

func (b *bench) queuedSection() error {
	samples := map[string][]queuedSample{}
	for rep := 0; rep < b.cfg.QueuedReps; rep++ {
		for _, be := range b.cfg.Backends { // interleaved: the host's drift hits both
			s, err := b.queuedOnce(be)
			if err != nil {
				return err
			}
			samples[be] = append(samples[be], s)
		}
	}
	for _, be := range b.cfg.Backends {
		b.res.Queued = append(b.res.Queued, summarizeQueued(be, samples[be]))
	}
	return nil
}

// queuedOnce queues holdsQueued holds behind a holder and measures them
// while all of them wait.
func (b *bench) queuedOnce(be string) (queuedSample, error) {
	var s queuedSample
	if err := b.measureFloors(&s); err != nil {
		return s, err
	}
	dir := b.dir("queued-" + be)
	ready, gate := b.path("ready"), b.path("gate")
	g, err := b.startHold(holdSpec{Dir: dir, Track: be, Grace: -1, Cmd: b.helper("gate", ready, gate)})
	if err != nil {
		return s, err
	}
	holds := []*child{}
	defer func() {
		os.WriteFile(gate, nil, 0o644)
		for _, h := range append([]*child{g}, holds...) {
			h.wait(2 * time.Minute)
		}
	}()
	if _, ok := g.waitLine("payload started", time.Minute); !ok {
		return s, fmt.Errorf("holder did not start: %s", g.describe())
	}
	time.Sleep(200 * time.Millisecond) // the holder alone, settled: the baseline
	quiet := readMeminfo()
	time.Sleep(time.Second)
	before := readMeminfo()
	_, drift := kernelGrowth(quiet, before)
	s.driftKernel = drift / 1024 / holdsQueued
	s.driftAvail = (quiet["MemAvailable"] - before["MemAvailable"]) / 1024 / holdsQueued
	t0 := time.Now()
	for i := 0; i < holdsQueued; i++ {
		h, err := b.startHold(holdSpec{Dir: dir, Track: be, Grace: -1, Cmd: []string{"true"}})
		if err != nil {
			return s, err
		}
		holds = append(holds, h)
	}
	last, err := allWaiting(holds)
	if err != nil {
		return s, err
	}
	s.allQueuedMS = ms(last.Sub(t0))
	time.Sleep(time.Until(t0.Add(lobbySettled)))
	waitSteady(holds) // the head loads its tracker, the others move to the lobby
	return s, measureWaiting(&s, holds, before)
}

// allWaiting waits until every hold logged "waiting for the token" and
// returns the last one's time.
func allWaiting(holds []*child) (time.Time, error) {
	var last time.Time
	for _, h := range holds {
		l, ok := h.waitLine("waiting for the token", time.Minute)
		if !ok {
			return last, fmt.Errorf("a hold never queued: %s", h.describe())
		}
		if l.Time.After(last) {
			last = l.Time
		}
	}
	return last, nil
}

// waitSteady waits (at least 300 ms, at most 5 s) until the holds'
// memlock and resident pages have not changed for three reads 100 ms
// apart: the hold at the head may be loading its eBPF tracker, the ones
// behind it exec'ing into the lobby.
func waitSteady(holds []*child) {
	prev, same := -1.0, 0
	for t0 := time.Now(); time.Since(t0) < 5*time.Second && same < 3; {
		time.Sleep(100 * time.Millisecond)
		sum, seen := 0.0, map[string]bool{}
		for _, h := range holds {
			sum += memlockKiB(h.cmd.Process.Pid, seen) + residentKiB(h.cmd.Process.Pid)
		}
		if sum == prev {
			same++
		} else {
			prev, same = sum, 0
		}
	}
}

// measureWaiting fills s with the holds' pages and memlock and the host's
// growth since before, each per hold.
func measureWaiting(s *queuedSample, holds []*child, before map[string]float64) error {
	var sum procMem
	lock, own, seenLock := 0.0, 0.0, map[string]bool{}
	for _, h := range holds {
		pid := h.cmd.Process.Pid
		m, err := readProcMem(pid)
		if err != nil {
			return fmt.Errorf("a waiting hold's memory: %w", err)
		}
		sum.RSS, sum.PSS, sum.Private = sum.RSS+m.RSS, sum.PSS+m.PSS, sum.Private+m.Private
		lock += memlockKiB(pid, seenLock)
		own += ownKernelKiB(readKB(fmt.Sprintf("/proc/%d/status", pid)))
	}
	after := readMeminfo()
	if before == nil || after == nil {
		return fmt.Errorf("cannot read /proc/meminfo")
	}
	per := func(kib float64) float64 { return kib / 1024 / float64(len(holds)) }
	s.rss, s.pss, s.private, s.memlock, s.own = per(sum.RSS), per(sum.PSS), per(sum.Private), per(lock), per(own)
	byKey, grown := kernelGrowth(before, after)
	s.kernel, s.byKey = per(grown), map[string]float64{}
	for k, v := range byKey {
		s.byKey[k] = per(v)
	}
	s.availDrop = per(before["MemAvailable"] - after["MemAvailable"])
	return nil
}

// summarizeQueued is one backend's row over its repeats.
func summarizeQueued(be string, ss []queuedSample) QueuedMode {
	col := func(f func(queuedSample) float64) Dist {
		var xs []float64
		for _, s := range ss {
			xs = append(xs, f(s))
		}
		return summarize(xs)
	}
	m := QueuedMode{Backend: be, Holds: holdsQueued, Repeats: len(ss), KernelByKeyMiB: map[string]Dist{},
		AllQueuedMS:     col(func(s queuedSample) float64 { return s.allQueuedMS }),
		FloorImageMS:    col(func(s queuedSample) float64 { return s.floors[floorImage] }),
		FloorGoMS:       col(func(s queuedSample) float64 { return s.floors[floorGo] }),
		RSSMiB:          col(func(s queuedSample) float64 { return s.rss }),
		PSSMiB:          col(func(s queuedSample) float64 { return s.pss }),
		PrivateMiB:      col(func(s queuedSample) float64 { return s.private }),
		MemlockMiB:      col(func(s queuedSample) float64 { return s.memlock }),
		KernelMiB:       col(func(s queuedSample) float64 { return s.kernel }),
		HostMiB:         col(func(s queuedSample) float64 { return s.pss + s.memlock + s.kernel }),
		MemAvailDropMiB: col(func(s queuedSample) float64 { return s.availDrop }),
		OwnKernelMiB:    col(func(s queuedSample) float64 { return s.own }),
		DriftKernelMiB:  col(func(s queuedSample) float64 { return s.driftKernel }),
		DriftAvailMiB:   col(func(s queuedSample) float64 { return s.driftAvail }),
	}
	for _, k := range kernelKeys {
		m.KernelByKeyMiB[k] = col(func(s queuedSample) float64 { return s.byKey[k] })
	}
	return m
}

// residentKiB is pid's resident set (/proc/PID/statm), 0 when gone.
func residentKiB(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/statm", pid))
	f := strings.Fields(string(b))
	if err != nil || len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseFloat(f[1], 64)
	return pages * float64(os.Getpagesize()) / 1024
}

// memlockKiB sums the memlock of the BPF maps and programs pid's fds hold
// (fdinfo): what they hold of kernel memory. Each object counts once, in
// seen, however many fds (here or in an earlier process) hold it.
func memlockKiB(pid int, seen map[string]bool) float64 {
	fdinfo := fmt.Sprintf("/proc/%d/fdinfo", pid)
	ents, err := os.ReadDir(fdinfo)
	if err != nil {
		return 0
	}
	total := 0.0
	for _, e := range ents {
		data, err := os.ReadFile(filepath.Join(fdinfo, e.Name()))
		if err != nil {
			continue
		}
		if id, kib, ok := fdMemlock(string(data)); ok && !seen[id] {
			seen[id] = true
			total += kib
		}
	}
	return total
}

// fdMemlock reads one fdinfo: the BPF object's id ("map_id:N" or
// "prog_id:N") and its memlock in KiB; ok is false for any other fd.
func fdMemlock(fdinfo string) (id string, kib float64, ok bool) {
	haveLock := false
	for _, l := range strings.Split(fdinfo, "\n") {
		k, v, found := strings.Cut(l, ":")
		v = strings.TrimSpace(v)
		switch {
		case !found:
		case k == "memlock":
			b, _ := strconv.ParseFloat(v, 64)
			kib, haveLock = b/1024, true
		case k == "map_id" || k == "prog_id":
			id = k + ":" + v
		}
	}
	return id, kib, haveLock && id != ""
}

// queuedMarkdown is the section's table.
func queuedMarkdown(p func(string, ...any), ms []QueuedMode) {
	p("")
	p("### Waiting holds")
	p("")
	p("%d holds (`gpu-hold -- true`) started at once behind a holder on one resource: first start to the last \"waiting for the token\"; beside it, in the same repeat, %d `gpu-hold --version` and %d of the build's smallest Go program (`gpu-hold-lobby`, which exits at once when gpu-hold did not start it) started the same way, first start to last exit: what starting that many processes of the image, and of any Go program, costs the machine; and per waiting hold (the sum over the %d, or the host's growth, divided by %d) while all of them wait: RSS; PSS (smaps_rollup: each shared page divided among the processes that map it); private (Private_Clean + Private_Dirty); the kernel's part: BPF memlock (fdinfo) plus the growth of /proc/meminfo's Slab + KernelStack + PageTables from the holder alone to all %d waiting (of it, what /proc/PID/status attributes to each hold: VmPTE and a %d KiB stack per thread); MemAvailable's drop as a cross-check; and the same two host-wide readings over a second before the holds start (the rest of the host's drift). The target is judged on PSS + kernel: RSS counts the binary's shared pages again in every process, so 50 RSS add up to more than the host holds. Median [min..max] MiB over repeats.", holdsQueued, holdsQueued, holdsQueued, holdsQueued, holdsQueued, holdsQueued, threadStackKiB)
	p("")
	p("| backend | all queued ms | floor: image ms | floor: Go ms | RSS | PSS | private | kernel: memlock | kernel: Slab + KernelStack + PageTables | of it page tables + stacks | PSS + kernel | MemAvailable drop | drift without holds: kernel / MemAvailable |")
	p("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, m := range ms {
		p("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s / %s |", m.Backend, m.AllQueuedMS.String(), m.FloorImageMS.String(), m.FloorGoMS.String(), cell(m.RSSMiB, nanNum), cell(m.PSSMiB, nanNum),
			cell(m.PrivateMiB, nanNum), cell(m.MemlockMiB, nanNum), cell(m.KernelMiB, nanNum), cell(m.OwnKernelMiB, nanNum), cell(m.HostMiB, nanNum),
			cell(m.MemAvailDropMiB, nanNum), num(m.DriftKernelMiB.Median), num(m.DriftAvailMiB.Median))
	}
}

// nanNum is "no ratio" for cell.
var nanNum = Num(nan)

// queuedTargets: all queued within 0.5 s, at most 2 MiB per waiting hold
// of PSS + kernel.
func (b *bench) queuedTargets() []Target {
	var ts []Target
	for _, m := range b.res.Queued {
		ts = append(ts, Target{"50 holds queued, " + m.Backend, "<= 500 ms",
			fmt.Sprintf("%s ms (50 `gpu-hold --version`: %s ms; 50 of the smallest Go program: %s ms)", num(m.AllQueuedMS.Median), num(m.FloorImageMS.Median), num(m.FloorGoMS.Median)),
			status(m.AllQueuedMS.Median <= 500)})
		per := m.HostMiB.Median
		ts = append(ts, Target{"host memory per waiting hold, " + m.Backend,
			"<= 2 MiB of PSS + kernel (RSS counts shared pages in every process)",
			fmt.Sprintf("%s MiB (PSS %s + kernel %s: memlock %s, Slab/KernelStack/PageTables %s; RSS %s, private %s; MemAvailable drop %s)",
				num(per), num(m.PSSMiB.Median), num(m.MemlockMiB.Median+m.KernelMiB.Median), num(m.MemlockMiB.Median), num(m.KernelMiB.Median),
				num(m.RSSMiB.Median), num(m.PrivateMiB.Median), num(m.MemAvailDropMiB.Median)),
			status(m.HostMiB.N > 0 && per <= 2)})
	}
	return ts
}
