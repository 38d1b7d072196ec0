// pool.go owns the pool section: one mixed queue of 1-, 4- and 8-device
// holds with known durations on a fake 8-device pool, run under strict
// FIFO and under backfill (resources.json "backfill"), the repeats
// alternating. From the payloads' own enter and leave instants it measures
// device utilisation (device-seconds used over 8 x makespan) against the
// ideal schedule's, and when the wide holds (the heads that block) start.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// poolJob is one hold of the mix, queued in this order.
type poolJob struct {
	Count   int
	Dur     time.Duration
	MaxHold time.Duration
}

// poolMix: a 4-device hold that runs long, then an 8-device head that must
// wait for it, then twelve short 1-device holds. Strict FIFO leaves four
// devices idle while the head waits; backfill runs the short holds there,
// since their max holds end before the head can start.
func poolMix() []poolJob {
	jobs := []poolJob{{4, 12 * time.Second, 16 * time.Second}, {8, 2 * time.Second, 0}}
	for range 12 {
		jobs = append(jobs, poolJob{1, 3 * time.Second, 5 * time.Second})
	}
	return jobs
}

const poolSize = 8

// PoolRun is one run of the mix under one mode.
type PoolRun struct {
	Mode        string    `json:"mode"`
	Utilisation float64   `json:"utilisation"` // device-seconds used / (8 x makespan)
	MakespanS   float64   `json:"makespan_s"`
	WideStartS  []float64 `json:"wide_start_s"` // start of each hold of more than half the pool, from the first enter
	Backfills   int       `json:"backfills"`
}

// PoolResult is the pool section.
type PoolResult struct {
	Jobs      []poolJob `json:"jobs"`
	IdealUtil float64   `json:"ideal_utilisation"`
	Runs      []PoolRun `json:"runs"`
	// Ratio is the median backfill utilisation over the median FIFO one.
	Ratio Num `json:"backfill_over_fifo"`
	// HeadLaterS is the most any wide hold started later under backfill
	// than in the FIFO run beside it (<= 0: never later).
	HeadLaterS Num `json:"head_later_s"`
}

func (b *bench) poolSection() error {
	jobs := poolMix()
	res := &PoolResult{Jobs: jobs, IdealUtil: idealUtil(jobs)}
	reps := max(1, min(b.cfg.E2EReps/4, 3))
	var fifo, bf []float64
	later := -1e9
	for rep := range reps {
		modes := []string{"fifo", "backfill"}
		if rep%2 == 1 {
			modes = []string{"backfill", "fifo"}
		}
		byMode := map[string]PoolRun{}
		for _, m := range modes {
			r, err := b.poolRun(jobs, m)
			if err != nil {
				return err
			}
			res.Runs = append(res.Runs, r)
			byMode[m] = r
		}
		fifo, bf = append(fifo, byMode["fifo"].Utilisation), append(bf, byMode["backfill"].Utilisation)
		for i := range byMode["fifo"].WideStartS {
			later = max(later, byMode["backfill"].WideStartS[i]-byMode["fifo"].WideStartS[i])
		}
	}
	res.Ratio = Num(ratio(summarize(bf).Median, summarize(fifo).Median))
	res.HeadLaterS = Num(later)
	b.res.Pool = res
	return nil
}

// idealUtil is the utilisation of the best schedule's makespan, bounded
// below by the work over the pool and by the holds that cannot share the
// pool with any other (more than half of it) plus the longest of the rest.
func idealUtil(jobs []poolJob) float64 {
	var area, wide, rest float64
	for _, j := range jobs {
		d := j.Dur.Seconds()
		area += float64(j.Count) * d
		if j.Count > poolSize/2 {
			wide += d
		} else {
			rest = max(rest, d)
		}
	}
	return area / (poolSize * max(area/poolSize, wide+rest))
}

// poolRun queues the mix in order (each hold's ticket taken before the
// next starts) and measures it from the payloads' log.
func (b *bench) poolRun(jobs []poolJob, mode string) (PoolRun, error) {
	dir, log, err := b.poolDir(mode)
	if err != nil {
		return PoolRun{}, err
	}
	var kids []*child
	for i, j := range jobs {
		args := []string{b.bin, "--dir", dir, "--log-format", "json", "--track", "proc", "--cgroup", "off", "-g", "500ms", "--survivor-wait", "1s", "-n", strconv.Itoa(j.Count)}
		if j.MaxHold > 0 {
			args = append(args, "-t", j.MaxHold.String())
		}
		script := fmt.Sprintf(`echo "enter %d ${EPOCHREALTIME/./}" >> %q; sleep %.3f; echo "leave %d ${EPOCHREALTIME/./}" >> %q`, i, log, j.Dur.Seconds(), i, log)
		p, err := b.startProc(append(args, "--", "bash", "-c", script), nil, nil)
		if err != nil {
			return PoolRun{}, err
		}
		if _, ok := p.waitLine("waiting for the token", 30*time.Second); !ok {
			return PoolRun{}, fmt.Errorf("pool hold %d took no ticket: %s", i, p.describe())
		}
		kids = append(kids, p)
	}
	r := PoolRun{Mode: mode}
	for i, p := range kids {
		if err := p.wait(5 * time.Minute); err != nil || p.code() != 0 {
			return PoolRun{}, fmt.Errorf("pool hold %d: %v %s", i, err, p.describe())
		}
		if g, ok := p.line(fmt.Sprintf("%d of the %d devices", jobs[i].Count, poolSize)); ok && g.Fields["backfill"] == true {
			r.Backfills++
		}
	}
	return r, poolMeasure(&r, jobs, log)
}

// poolDir is a queue dir whose resources.json makes gpu a pool of 8 plain
// files, with backfill on or off.
func (b *bench) poolDir(mode string) (dir, log string, err error) {
	dir = b.dir(fmt.Sprintf("pool-%s-%d", mode, b.seq))
	b.seq++
	var devs []string
	for i := range poolSize {
		p := filepath.Join(dir, fmt.Sprintf("fakedev%d", i))
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			return "", "", err
		}
		devs = append(devs, fmt.Sprintf(`{"nodes": [%q]}`, p))
	}
	cfg := fmt.Sprintf(`{"gpu": {"devices": [], "pool": {"devices": [%s], "backfill": %v}}}`, strings.Join(devs, ", "), mode == "backfill")
	return dir, filepath.Join(dir, "inside.log"), os.WriteFile(filepath.Join(dir, "resources.json"), []byte(cfg), 0o644)
}

// poolMeasure reads the enter and leave instants (microseconds).
func poolMeasure(r *PoolRun, jobs []poolJob, log string) error {
	data, err := os.ReadFile(log)
	if err != nil {
		return err
	}
	enter, leave := map[int]float64{}, map[int]float64{}
	first, last := 1e300, 0.0
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(l)
		if len(f) != 3 {
			return fmt.Errorf("bad pool log line %q", l)
		}
		i, _ := strconv.Atoi(f[1])
		us, _ := strconv.ParseFloat(f[2], 64)
		s := us / 1e6
		if f[0] == "enter" {
			enter[i], first = s, min(first, s)
		} else {
			leave[i], last = s, max(last, s)
		}
	}
	if len(enter) != len(jobs) || len(leave) != len(jobs) {
		return fmt.Errorf("pool log has %d enters and %d leaves for %d holds", len(enter), len(leave), len(jobs))
	}
	var used float64
	for i, j := range jobs {
		used += float64(j.Count) * (leave[i] - enter[i])
		if j.Count > poolSize/2 {
			r.WideStartS = append(r.WideStartS, enter[i]-first)
		}
	}
	r.MakespanS = last - first
	r.Utilisation = used / (poolSize * r.MakespanS)
	return nil
}

// poolTargets are issue #18's: backfill at least 1.3x strict FIFO's
// utilisation, and the head never starting later.
func poolTargets(r *PoolResult) []Target {
	if r == nil {
		return []Target{{"pool: backfill utilisation over strict FIFO", ">= 1.3x", "section not run", "not measured"},
			{"pool: wide holds' start under backfill vs FIFO", "never later", "section not run", "not measured"}}
	}
	// A start within the noise of one hold's start-up counts as not later.
	const noise = 0.5
	return []Target{
		{"pool: backfill utilisation over strict FIFO", ">= 1.3x", fmt.Sprintf("%.2fx", float64(r.Ratio)), status(float64(r.Ratio) >= 1.3)},
		{"pool: wide holds' start under backfill vs FIFO", "never later", fmt.Sprintf("at most %+.2fs", float64(r.HeadLaterS)), status(float64(r.HeadLaterS) <= noise)},
	}
}

func poolMarkdown(p func(string, ...any), r *PoolResult) {
	if r == nil {
		return
	}
	p("")
	p("### Device pools: strict FIFO and backfill")
	p("")
	p("A fake pool of %d devices; queued in order: 1 hold of 4 devices for 12s (max hold 16s), 1 of 8 devices for 2s (the head that waits), 12 of 1 device for 3s (max hold 5s). Utilisation is device-seconds used over %d x makespan, from the payloads' own enter and leave instants; the ideal schedule's is %.2f.", poolSize, poolSize, r.IdealUtil)
	p("")
	p("| run | mode | utilisation | makespan s | wide holds start at s | backfills |")
	p("|---|---|---|---|---|---|")
	for i, x := range r.Runs {
		var ws []string
		for _, s := range x.WideStartS {
			ws = append(ws, fmt.Sprintf("%.2f", s))
		}
		p("| %d | %s | %.3f | %.2f | %s | %d |", i+1, x.Mode, x.Utilisation, x.MakespanS, strings.Join(ws, ", "), x.Backfills)
	}
}
