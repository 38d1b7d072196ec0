// busy.go owns the busy-host section: the host is filled with unrelated
// processes (sleep, each with busyFDs open files, marked like everything
// the bench starts), one of which holds a fake device node (an unused
// device number, held with O_PATH), and one more whose thread sleeps in a
// read of /dev/ptmx (a multi-threaded holder waiting on its device); then
// `gpu-hold --device NODE -- true` per backend, and the device-holder
// check's own time by each of its ways (the host's device watch, the
// kernel's fd tables, the walk of /proc), each of which must report the one
// holder, and the watch's check of /dev/ptmx beside it; beside each hold's
// wall time, its CPU time and the kernel threads' CPU over the same
// repeats, which tell the hold's own growth from the host's. The fillers
// are ended before the next size.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/cgroup"
	"github.com/gpu-hold/gpu-hold/internal/device"
	"github.com/gpu-hold/gpu-hold/tracker"
)

// busyFDs is how many files each filler process holds open.
const busyFDs = 50

// BusyRow is one host size.
type BusyRow struct {
	Processes int `json:"processes"` // fillers started (the device holder is one more)
	// HoldMS is `gpu-hold --device NODE -- true`'s wall time per backend.
	HoldMS map[string]Dist `json:"hold_ms"`
	// CheckMS is the device-holder check's own time per way: "watch"
	// (the host's device watch), "kernel"
	// (BPF iterator, then /proc of the candidates) and "proc" (walk);
	// "watch-blocked" is the watch's check of /dev/ptmx, whose holder
	// sleeps in a read of it.
	CheckMS map[string]Dist `json:"check_ms"`
	// KernelWhy is why the kernel way did not answer ("" when it did).
	KernelWhy string `json:"kernel_why,omitempty"`
	// HoldCPUMS is the CPU time (user+sys) of each hold and what it reaped:
	// what grows here is the hold's own work; what grows only in HoldMS is
	// the host's.
	HoldCPUMS map[string]Dist `json:"hold_cpu_ms"`
	// KernelThreads is what the kernel's own threads ran during the row's
	// repeats (a memory monitor's scan grows with the host's memory).
	KernelThreads *KThreadUse `json:"kernel_threads,omitempty"`
	// Calm is the wait, before the repeats, for the kernel's threads to
	// calm after the fillers' start (settleFilled).
	Calm *Calm `json:"calm,omitempty"`
	// Again marks the idle host measured a second time, after the largest
	// size: the VM's drift over the section shows as the two idle rows'
	// difference, and the target is judged against both.
	Again bool `json:"again,omitempty"`
}

// BusyResult is the busy-host section.
type BusyResult struct {
	FDs     int       `json:"fds_per_process"`
	Repeats int       `json:"repeats"`
	Rows    []BusyRow `json:"rows"`
}

func (b *bench) busySection() error {
	res := &BusyResult{FDs: busyFDs, Repeats: b.cfg.BusyReps}
	b.res.Busy = res
	node, err := fakeDeviceNode(b.path("fakegpu0"))
	if err != nil {
		return err
	}
	sizes := b.cfg.BusySizes
	for _, n := range sizes {
		row, err := b.busyRow(n, node)
		if err != nil {
			return err
		}
		res.Rows = append(res.Rows, row)
	}
	if len(sizes) < 2 || sizes[0] != 0 {
		return nil
	}
	row, err := b.busyRow(0, node)
	if err != nil {
		return err
	}
	row.Again = true
	res.Rows = append(res.Rows, row)
	return nil
}

// idleRows are the idle host's rows (before the others, and again after
// them when it was measured twice) and the largest size's.
func (r *BusyResult) idleRows() (idle []BusyRow, big BusyRow) {
	for _, row := range r.Rows {
		switch {
		case row.Processes == 0:
			idle = append(idle, row)
		case row.Processes >= big.Processes:
			big = row
		}
	}
	return idle, big
}

// idleMedian is the idle host's median of f: the mean of the idle rows'
// medians, so that a drift of the VM over the section counts half on
// each side.
func idleMedian(idle []BusyRow, f func(BusyRow) Dist) float64 {
	sum := 0.0
	for _, row := range idle {
		sum += f(row).Median
	}
	return sum / float64(len(idle))
}

// label names the row in the tables.
func (row BusyRow) label() string {
	if row.Again {
		return "0, again after the largest"
	}
	return fmt.Sprint(row.Processes)
}

// busyRow fills the host with n processes, measures, and ends them.
func (b *bench) busyRow(n int, node string) (BusyRow, error) {
	row := BusyRow{Processes: n, HoldMS: map[string]Dist{}, HoldCPUMS: map[string]Dist{}, CheckMS: map[string]Dist{}}
	fill, err := b.startFillers(n, node)
	defer fill.end()
	if err != nil {
		return row, err
	}
	progress("busy host: %d fillers with %d fds each, and one holder of %s", n, busyFDs, node)
	calm := settleFilled()
	row.Calm = &calm
	samples := map[string][]float64{}
	kt0, t0 := kthreadTimes(), time.Now()
	for rep := 0; rep < b.cfg.BusyReps; rep++ {
		if err := busyChecks(&row, node, fill.holder.Process.Pid, fill.reader.Process.Pid, samples); err != nil {
			return row, err
		}
		if err := b.busyHolds(n, node, samples); err != nil {
			return row, err
		}
	}
	row.KernelThreads = kthreadUse(kt0, kthreadTimes(), time.Since(t0))
	for k, v := range samples {
		kind, name, _ := strings.Cut(k, " ")
		byKind := map[string]map[string]Dist{"hold": row.HoldMS, "cpu": row.HoldCPUMS, "check": row.CheckMS}
		byKind[kind][name] = summarize(v)
	}
	return row, nil
}

// settleFilled waits, once the fillers run, for the CPUs to be idle, then
// for the kernel's threads to calm (kernelCalm), and says how long.
func settleFilled() Calm {
	settle(20 * time.Second)
	c := kernelCalm(calmLimit)
	progress("waited for the kernel's threads: %s", c)
	return c
}

// calmLimit bounds kernelCalm: past it the row is measured as the host is,
// and its table says so.
const calmLimit = 2 * time.Minute

// busyHoldTurns is how many holds of each backend a repeat runs: a hold
// takes milliseconds and a check of the /proc walk seconds, and the
// busy host's hiccups (100-500 ms) need more than 5 holds to leave the
// median alone.
const busyHoldTurns = 3

// busyChecks times the device check once each way, each of which must
// report the one holder; samples are keyed "check WAY".
func busyChecks(row *BusyRow, node string, holder, reader int, samples map[string][]float64) error {
	mnt := cgroup.Mount()
	tdevs := func(devs []device.DevNum) []tracker.Dev {
		td := make([]tracker.Dev, len(devs))
		for i, d := range devs {
			td[i] = tracker.Dev(d)
		}
		return td
	}
	watch := func(devs []device.DevNum, paths []string) ([]int, error) {
		files, _, err := tracker.WatchDeviceFiles(tdevs(devs), paths, mnt)
		pids := make([]int, 0, len(files))
		for _, f := range files {
			pids = append(pids, f.PID)
		}
		return pids, err
	}
	scan := func(devs []device.DevNum, _ []string) ([]int, error) { return tracker.ScanDevicePIDs(tdevs(devs)) }
	for _, way := range []struct {
		name string
		f    device.Finder
	}{{"watch", watch}, {"kernel", scan}, {"proc", nil}} {
		t0 := time.Now()
		hs, how, why, err := device.ScanHoldersWith([]string{node}, way.f)
		d := time.Since(t0)
		if err != nil {
			return fmt.Errorf("device check (%s): %w", way.name, err)
		}
		if way.f != nil && how != device.MethodKernel {
			row.KernelWhy = why
			continue
		}
		if len(hs) != 1 || hs[0].PID != holder {
			return fmt.Errorf("device check (%s) with %d fillers found %+v, not the one holder pid %d: it missed a holder", way.name, row.Processes, hs, holder)
		}
		samples["check "+way.name] = append(samples["check "+way.name], ms(d))
	}
	return blockedCheck(watch, reader, samples)
}

// blockedCheck times the watch's check of /dev/ptmx, which must report
// reader, whose thread sleeps in a read of it: the one reference more
// than its fd slot makes the watch read every fd table.
func blockedCheck(watch device.Finder, reader int, samples map[string][]float64) error {
	t0 := time.Now()
	hs, how, why, err := device.ScanHoldersWith([]string{blockedNode}, watch)
	d := time.Since(t0)
	if err != nil {
		return fmt.Errorf("device watch's check of %s: %w", blockedNode, err)
	}
	if how != device.MethodKernel {
		return fmt.Errorf("the device watch did not answer the check of %s: %s", blockedNode, why)
	}
	if !slices.ContainsFunc(hs, func(h device.Holder) bool { return h.PID == reader }) {
		return fmt.Errorf("device watch's check of %s found %+v, not the blocked reader pid %d: it missed a holder", blockedNode, hs, reader)
	}
	samples["check watch-blocked"] = append(samples["check watch-blocked"], ms(d))
	return nil
}

// busyHolds runs `gpu-hold --device NODE -- true` busyHoldTurns times per
// backend, the backends alternating; samples are keyed "hold BACKEND"
// (wall) and "cpu BACKEND" (user+sys of the hold and what it reaped).
func (b *bench) busyHolds(n int, node string, samples map[string][]float64) error {
	for range busyHoldTurns {
		if err := b.busyHoldTurn(n, node, samples); err != nil {
			return err
		}
	}
	return nil
}

// busyHoldTurn runs one hold of each backend.
func (b *bench) busyHoldTurn(n int, node string, samples map[string][]float64) error {
	for _, be := range b.cfg.Backends {
		spec := holdSpec{Dir: b.dir(fmt.Sprintf("busy-%s-%d", be, n)), Track: be, Grace: -1, Cmd: []string{"true"}}
		argv := append([]string{b.bin, "--device", node}, b.holdArgs(spec)...)
		p, err := b.startProc(argv, nil, nil)
		if err != nil {
			return err
		}
		if err := p.wait(2 * time.Minute); err != nil {
			return err
		}
		if p.code() != 0 {
			return fmt.Errorf("busy host, %s: %s", be, p.describe())
		}
		st := p.cmd.ProcessState
		samples["hold "+be] = append(samples["hold "+be], ms(p.exitAt.Sub(p.start)))
		samples["cpu "+be] = append(samples["cpu "+be], ms(st.UserTime()+st.SystemTime()))
	}
	return nil
}

// fakeDeviceNode makes a character device node with a major of the
// local/experimental range (240-254) that no driver has registered.
func fakeDeviceNode(path string) (string, error) {
	data, err := os.ReadFile("/proc/devices")
	if err != nil {
		return "", err
	}
	used := map[string]bool{}
	for _, f := range strings.Fields(string(data)) {
		used[f] = true
	}
	for m := 254; m >= 240; m-- {
		if used[strconv.Itoa(m)] {
			continue
		}
		if err := unix.Mknod(path, unix.S_IFCHR|0o600, int(unix.Mkdev(uint32(m), 0))); err != nil {
			return "", fmt.Errorf("mknod %s (needs root): %w", path, err)
		}
		return path, nil
	}
	return "", fmt.Errorf("no unused character device major in 240-254 for a fake device node")
}

// fillersPerHelper is how many fillers one helper process starts: each
// keeps a pidfd per child, within its open-file limit.
const fillersPerHelper = 2000

// fillers are the busy host's processes: helpers that each started up to
// fillersPerHelper of them, and the holder of the fake device node.
type fillers struct {
	helpers []*exec.Cmd
	stdins  []io.Closer
	holder  *exec.Cmd
	reader  *exec.Cmd // asleep in a read of blockedNode
}

// blockedNode is the device the blocked reader reads: each open of it is
// a pty whose read blocks until its other side writes, which no one does.
const blockedNode = "/dev/ptmx"

// startFillers starts n sleeps holding busyFDs files each (through
// helpers), and, unless node is "", one more holding node (O_PATH: nothing
// can open an unregistered device) and the blocked reader.
func (b *bench) startFillers(n int, node string) (*fillers, error) {
	f := &fillers{}
	for left := n; left > 0; left -= fillersPerHelper {
		k := min(left, fillersPerHelper)
		c := exec.Command(b.self, "helper", "fillers", strconv.Itoa(k))
		in, err := c.StdinPipe()
		if err != nil {
			return f, err
		}
		out, err := c.StdoutPipe()
		if err != nil {
			return f, err
		}
		c.Stderr = os.Stderr
		if err := c.Start(); err != nil {
			return f, err
		}
		f.helpers, f.stdins = append(f.helpers, c), append(f.stdins, in)
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil || line != "ready\n" {
			return f, fmt.Errorf("a filler helper did not start its %d processes: %q %v", k, line, err)
		}
	}
	if node == "" {
		return f, nil
	}
	fd, err := unix.Open(node, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return f, err
	}
	nf := os.NewFile(uintptr(fd), node)
	defer nf.Close()
	f.holder = exec.Command("sleep", "86400")
	f.holder.ExtraFiles = []*os.File{nf}
	if err := f.holder.Start(); err != nil {
		f.holder = nil
		return f, err
	}
	return f, b.startReader(f)
}

// startReader starts the blocked reader and waits until it sleeps in its read.
func (b *bench) startReader(f *fillers) error {
	c := exec.Command(b.self, "helper", "blockread", blockedNode)
	out, err := c.StdoutPipe()
	if err != nil {
		return err
	}
	c.Stderr = os.Stderr
	if err := c.Start(); err != nil {
		return err
	}
	f.reader = c
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		return fmt.Errorf("the blocked reader of %s did not start: %q %v", blockedNode, line, err)
	}
	return nil
}

// end makes every helper end its fillers (stdin's EOF) and waits for it,
// and kills and reaps the holder (the bench's own child: its pidfd).
func (f *fillers) end() {
	for _, in := range f.stdins {
		in.Close()
	}
	for _, c := range f.helpers {
		c.Wait()
	}
	for _, c := range []*exec.Cmd{f.holder, f.reader} {
		if c != nil {
			c.Process.Kill()
			c.Wait()
		}
	}
	f.helpers, f.stdins, f.holder, f.reader = nil, nil, nil, nil
}

// fillersHelper is the helper mode: n sleeps with busyFDs files of a
// private temp dir open each, killed and reaped (its own children) when
// stdin reaches EOF.
func fillersHelper(n int) {
	dir, err := os.MkdirTemp("", "gpu-hold-bench-fds-")
	if err != nil {
		fatalf("helper fillers: %v", err)
	}
	var files []*os.File
	for i := 0; i < busyFDs; i++ {
		file, err := os.Create(filepath.Join(dir, strconv.Itoa(i)))
		if err != nil {
			fatalf("helper fillers: %v", err)
		}
		files = append(files, file)
	}
	os.RemoveAll(dir) // the open files stay open
	var cmds []*exec.Cmd
	defer func() {
		for _, c := range cmds {
			c.Process.Kill()
		}
		for _, c := range cmds {
			c.Wait()
		}
	}()
	for i := 0; i < n; i++ {
		c := exec.Command("sleep", "86400")
		c.ExtraFiles = files
		if err := c.Start(); err != nil {
			fmt.Fprintf(os.Stderr, "helper fillers: starting %d of %d: %v\n", i+1, n, err)
			return
		}
		cmds = append(cmds, c)
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
}

// busyMarkdown is the section's table.
func (r *BusyResult) markdown(p func(string, ...any), backends []string) {
	p("")
	p("### Busy host")
	p("")
	p("The host filled with unrelated `sleep` processes holding %d open files each, and one more that holds a fake device node (an unregistered device number, with O_PATH), which each check must report. `gpu-hold --device NODE -- true` per backend; the device-holder check's own time by the host's device watch (the openers' fd tables, checked against the kernel's reference counts), by the kernel's fd tables (BPF iterator over every one, then /proc of the processes it names) and by the walk of /proc (the fallback); and the watch's check of %s, whose holder (one more process, multi-threaded) has a thread asleep in a read of it: that holds one reference more than its fd slot, which the watch cannot place, so that check reads every fd table (the check of the fake node beside it does not). Each size is measured once the kernel's threads have calmed after the fillers' start (below), and the idle host once more after the largest: the VM's drift over the section shows between the two idle rows, and the target is judged against their mean. Median [min..max] ms over %d repeats of the checks, and %d holds of each backend (%d a repeat, the backends alternating).", r.FDs, blockedNode, r.Repeats, busyHoldTurns*r.Repeats, busyHoldTurns)
	p("")
	head := "| processes |"
	sep := "|---|"
	for _, be := range backends {
		head += " gpu-hold " + be + " |"
		sep += "---|"
	}
	p("%s check: watch | check: kernel | check: /proc walk | check: watch, holder asleep in a read |", head)
	p("%s---|---|---|---|", sep)
	for _, row := range r.Rows {
		line := "| " + row.label() + " |"
		for _, be := range backends {
			line += " " + row.HoldMS[be].String() + " |"
		}
		k := row.CheckMS["kernel"].String()
		if row.KernelWhy != "" {
			k = "n/a (" + row.KernelWhy + ")"
		}
		p("%s %s | %s | %s | %s |", line, row.CheckMS["watch"].String(), k, row.CheckMS["proc"].String(), row.CheckMS["watch-blocked"].String())
	}
	r.cpuMarkdown(p, backends)
}

// cpuMarkdown tells the hold's own work from the host's: each hold's CPU
// time beside what the kernel's threads ran during the same repeats.
func (r *BusyResult) cpuMarkdown(p func(string, ...any), backends []string) {
	p("")
	p("Where the time goes: each hold's CPU time (user+sys, with what it reaped; median [min..max] ms), and the CPU the kernel's own threads used during the row's repeats, as a share of one CPU, with the busiest of them. Before the repeats, each size waited for the kernel's threads to use less than %s%% of a CPU over %s (at most %s): a host just filled with thousands of processes keeps a memory monitor busy while it learns their memory.", num(100*calmShare), calmWindow, calmLimit)
	p("")
	head, sep := "| processes |", "|---|"
	for _, be := range backends {
		head += " CPU of gpu-hold " + be + " |"
		sep += "---|"
	}
	p("%s kernel threads | busiest | waited for them to calm |", head)
	p("%s---|---|---|", sep)
	for _, row := range r.Rows {
		line := "| " + row.label() + " |"
		for _, be := range backends {
			line += " " + row.HoldCPUMS[be].String() + " |"
		}
		if k := row.KernelThreads; k != nil && k.Busiest != "" {
			line += fmt.Sprintf(" %s%% of a CPU | %s, %s ms |", num(100*k.Share()), k.Busiest, num(k.BusiestMS))
		} else if k != nil {
			line += " none ran | |"
		} else {
			line += " | |"
		}
		if row.Calm != nil {
			line += " " + row.Calm.String() + " |"
		} else {
			line += " |"
		}
		p("%s", line)
	}
}

// busyTargets: at the largest host, a hold within 1.2x its idle-host time
// per backend (the kernel's fd tables answering the device check), and the
// fallback walk's growth stated.
func (b *bench) busyTargets() []Target {
	r := b.res.Busy
	if r == nil || len(r.Rows) < 2 {
		return []Target{{"busy host", "<= 1.2x idle host at the largest size", "section not run", "not measured"}}
	}
	idles, big := r.idleRows()
	if len(idles) == 0 || big.Processes == 0 {
		return []Target{{"busy host", "<= 1.2x idle host at the largest size", "no idle row, or no busy one", "not measured"}}
	}
	idle := idles[0]
	var ts []Target
	for _, be := range b.cfg.Backends {
		wall := idleMedian(idles, func(r BusyRow) Dist { return r.HoldMS[be] })
		x := ratio(big.HoldMS[be].Median, wall)
		cpu := ratio(big.HoldCPUMS[be].Median, idleMedian(idles, func(r BusyRow) Dist { return r.HoldCPUMS[be] }))
		ts = append(ts, Target{
			Name:   fmt.Sprintf("busy host, gpu-hold %s --device, %d processes", be, big.Processes),
			Want:   "<= 1.2x idle host",
			Got:    fmt.Sprintf("%sx (%s ms vs %s ms%s; its CPU time %sx)%s%s", num3(x), num(big.HoldMS[be].Median), num(wall), idleSpread(idles, be), num3(cpu), kthreadNote(idle, big), calmNote(big)),
			Status: status(x <= 1.2),
		})
	}
	wa, k, w := big.CheckMS["watch"].Median, big.CheckMS["kernel"].Median, big.CheckMS["proc"].Median
	ts = append(ts, Target{
		Name:   fmt.Sprintf("device check, %d processes", big.Processes),
		Want:   "stated (the /proc walk is the fallback)",
		Got:    fmt.Sprintf("watch %s ms (%s ms idle), kernel %s ms, /proc walk %s ms (%s ms idle)", num(wa), num(idle.CheckMS["watch"].Median), num(k), num(w), num(idle.CheckMS["proc"].Median)),
		Status: "met",
	})
	return ts
}

// idleSpread names the idle rows' medians when the idle host was measured
// twice.
func idleSpread(idles []BusyRow, be string) string {
	if len(idles) < 2 {
		return ""
	}
	return fmt.Sprintf(", the mean of %s ms before and %s ms after", num(idles[0].HoldMS[be].Median), num(idles[len(idles)-1].HoldMS[be].Median))
}

// calmNote says when a row was measured before the kernel's threads
// calmed (kernelCalm reached its bound).
func calmNote(row BusyRow) string {
	if row.Calm == nil || row.Calm.Calm {
		return ""
	}
	return "; measured before the kernel threads calmed (" + row.Calm.String() + ")"
}

// kthreadNote names the kernel threads' share of a CPU at both sizes when
// it grew, the host's work that a hold's wall time pays and its CPU does not.
func kthreadNote(idle, big BusyRow) string {
	ki, kb := idle.KernelThreads, big.KernelThreads
	if ki == nil || kb == nil || kb.Share() <= ki.Share() {
		return ""
	}
	return fmt.Sprintf("; kernel threads %s%% of a CPU against %s%% idle, most of it %s", num(100*kb.Share()), num(100*ki.Share()), kb.Busiest)
}
