// e2e.go owns section 5: the wall time of `gpu-hold -- true` per backend
// beside `flock LOCK timeout 60 true` and bare `true`, repeats interleaved;
// and, from the holds' logs, the launch cost (token taken to payload
// started) per backend, whose bpf-minus-proc difference is what making the
// eBPF tracker costs a hold (a spare taken, or a load when none is there).
package main

import (
	"fmt"
	"os/exec"
	"time"
)

// E2EMode is one way of running `true`.
type E2EMode struct {
	Mode   string `json:"mode"`
	Cmd    string `json:"cmd"`
	WallMS Dist   `json:"wall_ms"`
	Ratio  Num    `json:"ratio_to_flock"`
	// Holds only, from the log: process start -> "waiting for the token"
	// (flags, backend choice), token taken -> payload started, and payload
	// started -> token released.
	StartupMS *Dist `json:"startup_ms,omitempty"` // process start -> "waiting for the token"
	QueueMS   *Dist `json:"queue_ms,omitempty"`   // "waiting for the token" -> "token taken", queue empty
	LaunchMS  *Dist `json:"launch_ms,omitempty"`
	ReleaseMS *Dist `json:"payload_to_release_ms,omitempty"`
	ExitMS    *Dist `json:"release_to_exit_ms,omitempty"` // "token released" -> process exit
}

// E2EResult is section 5.
type E2EResult struct {
	Repeats int       `json:"repeats"`
	Modes   []E2EMode `json:"modes"`
	// BPFLoadMS is the bpf launch median minus the proc launch median:
	// what loading and attaching the programs costs per hold.
	BPFLoadMS Num `json:"bpf_load_ms"`
	// BPFProbeMS is the bpf startup median minus the proc startup median:
	// choosing the backend (a probe load) before queueing.
	BPFProbeMS Num `json:"bpf_probe_ms"`
	// BPFExtraMS is the bpf wall median minus the proc wall median.
	BPFExtraMS Num `json:"bpf_extra_wall_ms"`
	// BPFLoad is the tracker's load and a spare's take, timed on their own.
	BPFLoad *BPFLoadTimes `json:"bpf_load,omitempty"`
}

func (b *bench) e2eSection() error {
	truePath, err := exec.LookPath("true")
	if err != nil {
		return err
	}
	lock := b.path("e2e.lock")
	type mode struct {
		name, cmd string
		argv      []string
		track     string
	}
	modes := []mode{
		{"bare", "true", []string{truePath}, ""},
		{"flock+timeout", "flock LOCK timeout 60 true", []string{"flock", lock, "timeout", "60", "true"}, ""},
	}
	for _, be := range b.cfg.Backends {
		spec := holdSpec{Dir: b.dir("e2e-" + be), Track: be, Grace: -1, Cmd: []string{"true"}}
		modes = append(modes, mode{"gpu-hold " + be, "gpu-hold --track=" + be + " -- true", append([]string{b.bin}, b.holdArgs(spec)...), be})
	}
	wall := map[string][]float64{}
	launch := map[string][]float64{}
	startup := map[string][]float64{}
	exit := map[string][]float64{}
	queue := map[string][]float64{}
	release := map[string][]float64{}
	for rep := 0; rep < b.cfg.E2EReps; rep++ {
		for _, m := range modes {
			p, err := b.startProc(m.argv, nil, nil)
			if err != nil {
				return err
			}
			if err := p.wait(time.Minute); err != nil {
				return err
			}
			if p.code() != 0 {
				return fmt.Errorf("%s: %s", m.name, p.describe())
			}
			wall[m.name] = append(wall[m.name], ms(p.exitAt.Sub(p.start)))
			if m.track != "" {
				// The process has exited; its last lines may still be
				// in the pipe's reader: wait for each.
				waiting, ok0 := p.waitLine("waiting for the token", time.Second)
				taken, ok1 := p.waitLine("token taken", time.Second)
				started, ok2 := p.waitLine("payload started", time.Second)
				released, ok3 := p.waitLine("token released", time.Second)
				if !ok0 || !ok1 || !ok2 || !ok3 {
					return fmt.Errorf("%s: log lacks token taken / payload started / token released: %s", m.name, p.describe())
				}
				startup[m.name] = append(startup[m.name], ms(waiting.Time.Sub(p.start)))
				queue[m.name] = append(queue[m.name], ms(taken.Time.Sub(waiting.Time)))
				launch[m.name] = append(launch[m.name], ms(started.Time.Sub(taken.Time)))
				release[m.name] = append(release[m.name], ms(released.Time.Sub(started.Time)))
				exit[m.name] = append(exit[m.name], ms(p.exitAt.Sub(released.Time)))
			}
		}
	}
	res := &E2EResult{Repeats: b.cfg.E2EReps, BPFLoadMS: Num(nan), BPFProbeMS: Num(nan), BPFExtraMS: Num(nan)}
	b.res.E2E = res
	flock := summarize(wall["flock+timeout"]).Median
	for _, m := range modes {
		em := E2EMode{Mode: m.name, Cmd: m.cmd, WallMS: summarize(wall[m.name]), Ratio: Num(ratio(summarize(wall[m.name]).Median, flock))}
		if m.track != "" {
			s, l, r, x := summarize(startup[m.name]), summarize(launch[m.name]), summarize(release[m.name]), summarize(exit[m.name])
			q := summarize(queue[m.name])
			em.StartupMS, em.QueueMS, em.LaunchMS, em.ReleaseMS, em.ExitMS = &s, &q, &l, &r, &x
		}
		res.Modes = append(res.Modes, em)
	}
	if len(launch["gpu-hold bpf"]) > 0 && len(launch["gpu-hold proc"]) > 0 {
		res.BPFLoadMS = Num(summarize(launch["gpu-hold bpf"]).Median - summarize(launch["gpu-hold proc"]).Median)
		res.BPFProbeMS = Num(summarize(startup["gpu-hold bpf"]).Median - summarize(startup["gpu-hold proc"]).Median)
		res.BPFExtraMS = Num(summarize(wall["gpu-hold bpf"]).Median - summarize(wall["gpu-hold proc"]).Median)
		res.BPFLoad = bpfLoadTimes(max(b.cfg.E2EReps, 3))
	}
	return nil
}
