// footprint.go owns section 6: gpu-hold's memory and CPU while it holds a
// lineage of cfg.FootprintN processes (a wide cooperative tree): VmHWM and
// CPU time from /proc/PID while holding, the CPU it burns per second while
// the lineage just sits there, its own usage (maxrss, user+sys, from its
// record) after a TERM to the hold, and the BPF maps' memory as the kernel
// accounts it
// (memlock of each map the hold has open, found through /proc/PID/fdinfo
// and read with cilium/ebpf's MapInfo).
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
)

// MapMem is one BPF map the hold had open.
type MapMem struct {
	Name       string `json:"name"`
	Type       string `json:"type"`
	KeySize    uint32 `json:"key_size"`
	ValueSize  uint32 `json:"value_size"`
	MaxEntries uint32 `json:"max_entries"`
	MemlockKB  uint64 `json:"memlock_kb"`
}

// FootprintMode is one backend's footprint.
type FootprintMode struct {
	Backend      string   `json:"backend"`
	Processes    int      `json:"processes"`
	HoldingHWMMB Num      `json:"holding_vmhwm_mb"` // peak RSS up to the moment the lineage was complete
	HoldingCPUS  Num      `json:"holding_cpu_s"`    // user+sys up to then
	IdleCPUPct   Num      `json:"idle_cpu_pct"`     // user+sys per wall second while holding, nothing happening
	PeakRSSMB    float64  `json:"peak_rss_mb"`      // the hold's own maxrss (record usage), teardown included
	TotalCPUS    float64  `json:"total_cpu_s"`      // the hold's own user+sys (record usage), teardown included
	TeardownMS   Num      `json:"teardown_ms"`      // the "hold ended" line's teardown (TERM, cooperative)
	Maps         []MapMem `json:"maps,omitempty"`
	MapsKB       uint64   `json:"maps_memlock_kb"`
	MapsSource   string   `json:"maps_source,omitempty"`
}

func (b *bench) footprintSection() error {
	n := b.cfg.FootprintN
	pl := b.treePayload("wide", n, false)
	window := 3 * time.Second
	if b.cfg.Quick {
		window = time.Second
	}
	for _, be := range b.cfg.Backends {
		progress("footprint: %s holding %d processes", be, n)
		ready, run, rec := b.path("ready"), b.runMark(), b.path("fp.jsonl")
		p, err := b.startHold(holdSpec{Dir: b.dir("fp-" + be), Track: be, Grace: 10 * time.Second,
			Dump: rec, Env: []string{runEnv + "=" + run}, Cmd: pl.argv(ready)})
		if err != nil {
			return err
		}
		if err := waitFileOrExit(ready, p, 10*time.Minute); err != nil {
			p.cmd.Process.Signal(syscall.SIGTERM)
			p.wait(5 * time.Minute)
			return err
		}
		pid := p.cmd.Process.Pid
		time.Sleep(time.Second) // let a polling tracker find every member
		fm := FootprintMode{Backend: be, Processes: n}
		fm.HoldingHWMMB = Num(statusKB(pid, "VmHWM") / 1024)
		cpu0 := cpuSeconds(pid)
		fm.HoldingCPUS = Num(cpu0)
		t0 := time.Now()
		fm.Maps, fm.MapsSource = bpfMaps(pid)
		for _, m := range fm.Maps {
			fm.MapsKB += m.MemlockKB
		}
		time.Sleep(window)
		fm.IdleCPUPct = Num(100 * (cpuSeconds(pid) - cpu0) / time.Since(t0).Seconds())
		p.cmd.Process.Signal(syscall.SIGTERM)
		if err := p.wait(10 * time.Minute); err != nil {
			return err
		}
		if p.code() != 143 {
			return fmt.Errorf("footprint hold (%s) exited %d, want 143 (TERM): %s", be, p.code(), p.describe())
		}
		if rd, err := readRecord(rec); err == nil && rd.Hold.Usage != nil {
			fm.PeakRSSMB = float64(rd.Hold.Usage.MaxRSSKB) / 1024
			fm.TotalCPUS = rd.Hold.cpuMS() / 1000
		}
		p.waitLine("hold ended", 5*time.Second)
		fm.TeardownMS = Num(p.field("hold ended", "teardown_ms"))
		if left := killAll(newScanner(runEnv, run), 30*time.Second); left > 0 {
			return fmt.Errorf("footprint hold (%s) left %d marked processes alive", be, left)
		}
		b.res.Footprint = append(b.res.Footprint, fm)
	}
	return nil
}

// statusKB reads a "Key: N kB" line of /proc/PID/status.
func statusKB(pid int, key string) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nan
	}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == key+":" {
			v, _ := strconv.ParseFloat(f[1], 64)
			return v
		}
	}
	return nan
}

// cpuSeconds is utime+stime of pid from /proc/PID/stat (USER_HZ = 100).
func cpuSeconds(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nan
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return nan
	}
	u, _ := strconv.ParseFloat(f[11], 64) // field 14
	k, _ := strconv.ParseFloat(f[12], 64) // field 15
	return (u + k) / 100
}

// bpfMaps lists the BPF maps pid has open: their ids from
// /proc/PID/fdinfo, their names, shapes and memlock from the kernel.
func bpfMaps(pid int) ([]MapMem, string) {
	fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fdinfo/*", pid))
	seen := map[uint64]bool{}
	var out []MapMem
	for _, fd := range fds {
		data, err := os.ReadFile(fd)
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(data), "\n") {
			k, v, ok := strings.Cut(l, ":")
			if !ok || k != "map_id" {
				continue
			}
			id, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 32)
			if seen[id] {
				continue
			}
			seen[id] = true
			m, err := ebpf.NewMapFromID(ebpf.MapID(id))
			if err != nil {
				continue
			}
			if info, err := m.Info(); err == nil {
				mm := MapMem{Name: info.Name, Type: info.Type.String(), KeySize: info.KeySize, ValueSize: info.ValueSize, MaxEntries: info.MaxEntries}
				if ml, ok := info.Memlock(); ok {
					mm.MemlockKB = ml / 1024
				}
				out = append(out, mm)
			}
			m.Close()
		}
	}
	if len(out) == 0 {
		return nil, ""
	}
	return out, "kernel memlock accounting per map (fdinfo memlock via cilium/ebpf MapInfo.Memlock)"
}
