// doctor.go owns `gpu-hold doctor`: which tracker backends this host can use
// and, when one cannot be used, exactly why; then the host facts behind that
// (capabilities, BTF, kernel and its seal, cgroup v2, pidfd, subreaper,
// bpffs), the resources, and the queue directory's set-up with the command
// that fixes each problem, in short tables or as JSON.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gpu-hold/gpu-hold/internal/cgroup"
	"github.com/gpu-hold/gpu-hold/internal/device"
	"github.com/gpu-hold/gpu-hold/internal/dirconf"
	"github.com/gpu-hold/gpu-hold/internal/fleetenv"
	"github.com/gpu-hold/gpu-hold/internal/lobby"
	"github.com/gpu-hold/gpu-hold/internal/termsafe"
	"github.com/gpu-hold/gpu-hold/tracker"
)

type doctorOptions struct {
	g    *globalOpts
	JSON bool
	Out  io.Writer
	// Checks runs the checks; a seam for tests.
	Checks func() doctorReport
}

// doctorCheck is one row: a name, whether it is fine, and what was found.
type doctorCheck struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// doctorReport is what --json prints.
type doctorReport struct {
	// TrackAuto is the backend --track=auto would use here.
	TrackAuto string `json:"track_auto"`
	// Seal is how the eBPF tracker's seal stops forks here: "birth" (the
	// kfunc bpf_send_signal_task) or "fork"; empty when it cannot tell.
	Seal   string        `json:"seal,omitempty"`
	Checks []doctorCheck `json:"checks"`
	// Resources are the configured resources, their device nodes on this
	// host, and who holds them now.
	Resources []doctorResource `json:"resources"`
	// QueueDir is the check of the queue directory's ownership and modes.
	QueueDir fleetenv.DirReport `json:"queue_dir"`
	// FleetQueue says where the etcd backend is: built in, or
	// gpu-hold-fleet beside gpu-hold (or why that is not usable).
	FleetQueue string `json:"fleet_queue"`
	// WaitingHolds says where a hold with tickets ahead waits: in
	// gpu-hold-lobby, or (not installed) in full gpu-hold processes.
	WaitingHolds string `json:"waiting_holds"`
}

// doctorResource is one resource's device nodes and their holders.
type doctorResource struct {
	Name    string          `json:"name"`
	Nodes   []string        `json:"nodes"`
	Holders []device.Holder `json:"holders"`
	Error   string          `json:"error,omitempty"`
	// Pool is the resource's device pool (discovered, or from
	// resources.json); nil when it has fewer than two devices.
	Pool *device.Pool `json:"pool,omitempty"`
}

func newCmdDoctor(g *globalOpts) *cobra.Command {
	opts := &doctorOptions{g: g}
	opts.Checks = func() doctorReport {
		rep := runDoctorChecks()
		dir, _ := fleetenv.FindDir(g.Dir) // a dir it cannot use is reported by CheckQueueDir
		rep.Resources = doctorResources(dir)
		rep.QueueDir = fleetenv.CheckQueueDir(dir, wantedDirs(g.Resource, rep.Resources))
		checkSettings(&rep.QueueDir)
		rep.FleetQueue = fleet.about()
		rep.WaitingHolds = lobby.About()
		return rep
	}
	cmd := &cobra.Command{
		Use:   "doctor [--json]",
		Short: "Show which tracker backends this host can use, and why not",
		Long: `Check what gpu-hold needs from this host: whether the eBPF tracker (--track=bpf) and the
procfs tracker (--track=proc) can be used, and if not exactly why, then the facts behind it:
capabilities, kernel BTF, kernel version and the seal it gives the eBPF tracker (kill at birth
with bpf_send_signal_task on Linux 6.13+, else kill at fork with the children left to the KILL
pass), cgroup v2 and cgroup.kill, pidfds, the child subreaper, and the BPF filesystem. It loads and unloads the eBPF programs once to be sure.
Then it checks the queue directory: a fleet directory (shared by a group), each resource
directory and its records/ must be root's, of the users' group, and mode 3775; seq and token
group-writable regular files; resources.json root's. Each problem is one line with the
command that fixes it. It creates nothing, and exits 0 whatever it finds.`,
		Example: `  sudo gpu-hold doctor
  gpu-hold doctor --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Out = cmd.OutOrStdout()
			return doctorRun(opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the checks as JSON")
	return cmd
}

func doctorRun(opts *doctorOptions) error {
	rep := opts.Checks()
	if opts.JSON {
		enc := json.NewEncoder(opts.Out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return usageErr("writing the report: %w", err)
		}
		return nil
	}
	tw := tabwriter.NewWriter(opts.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tOK\tDETAIL")
	for _, c := range rep.Checks {
		ok := "yes"
		if !c.OK {
			ok = "no"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Name, ok, c.Detail)
	}
	fmt.Fprintf(tw, "--track=auto\t\tuses %s\n", rep.TrackAuto)
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "RESOURCE\tNODES\tHOLDERS")
	for _, r := range rep.Resources {
		nodes, holders := strings.Join(r.Nodes, " "), "none"
		if nodes == "" {
			nodes = "(no device node on this host)"
		}
		if r.Error != "" {
			holders = r.Error
		} else if len(r.Holders) > 0 {
			var hs []string
			for _, h := range r.Holders {
				hs = append(hs, h.String())
			}
			holders = strings.Join(hs, "; ")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Name, nodes, holders)
	}
	if err := tw.Flush(); err != nil {
		return usageErr("writing the report: %w", err)
	}
	printPools(opts.Out, rep.Resources)
	if _, err := fmt.Fprint(opts.Out, "\n"+queueDirText(rep.QueueDir)+"fleet queue (etcd): "+rep.FleetQueue+"\nwaiting holds: "+rep.WaitingHolds+"\n"); err != nil {
		return usageErr("writing the report: %w", err)
	}
	return nil
}

// queueDirText is the queue dir's check: a summary line, then one line per
// problem with its fix.
func queueDirText(d fleetenv.DirReport) string {
	var b strings.Builder
	switch {
	case d.Path == "":
		b.WriteString("queue dir: none (set --dir or GPU_HOLD_DIR)\n")
	case !d.Fleet && len(d.Problems) == 0:
		fmt.Fprintf(&b, "queue dir %s: private (only its owner may write it): nothing to set up\n", d.Path)
	case len(d.Problems) == 0:
		fmt.Fprintf(&b, "queue dir %s (shared through group %s): set up right\n", d.Path, d.Group)
	default:
		fmt.Fprintf(&b, "queue dir %s (shared through group %s): %d problem(s)\n", d.Path, d.Group, len(d.Problems))
	}
	for _, p := range d.Problems {
		fix := ""
		if p.Fix != "" {
			fix = "; fix: " + p.Fix
		}
		// A problem's path (and its fix) may name a file another user planted.
		fmt.Fprintf(&b, "  %s: %s%s\n", termsafe.Text(p.Path), termsafe.Text(p.Problem), termsafe.Text(fix))
	}
	return b.String()
}

// checkSettings adds to a fleet dir's report the problem with its settings
// file (dirconf), as holds and reaps see it: one that does not count
// (another user's, say) or does not parse sets no retention at all.
func checkSettings(d *fleetenv.DirReport) {
	if !d.Fleet || d.Path == "" {
		return
	}
	_, err := dirconf.Load(d.Path)
	if err == nil {
		return
	}
	path := filepath.Join(d.Path, dirconf.File)
	p := fleetenv.DirProblem{Path: path, Problem: err.Error(), Fix: "fix the file or remove it (rm " + path + ")"}
	var ue *dirconf.UntrustedError
	if errors.As(err, &ue) {
		p.Problem = "ignored, so no retention of it applies: " + ue.Why
		p.Fix = "chown root: " + path + "; chmod 644 " + path + " (or remove it)"
	}
	d.Problems = append(d.Problems, p)
}

// wantedDirs names the resource dirs an admin should have made: the
// default -r one and every resource with device nodes on this host.
func wantedDirs(def string, res []doctorResource) []string {
	want := []string{def}
	for _, r := range res {
		if len(r.Nodes) > 0 && r.Name != def {
			want = append(want, r.Name)
		}
		want = append(want, poolDirs(r)...)
	}
	return want
}

// runDoctorChecks inspects this host.
func runDoctorChecks() doctorReport {
	var rep doctorReport
	add := func(name string, err error, okDetail string) {
		c := doctorCheck{Name: name, OK: err == nil, Detail: okDetail}
		if err != nil {
			c.Detail = err.Error()
		}
		rep.Checks = append(rep.Checks, c)
	}

	bpfErr := tracker.ProbeBPF()
	add("backend bpf", unwrapProbe(bpfErr), "usable")
	add("backend proc", unwrapProbe(tracker.ProbeProc()), "usable")
	rep.TrackAuto = tracker.BackendBPF
	if bpfErr != nil {
		rep.TrackAuto = tracker.BackendProc
	}

	caps, err := tracker.EffectiveCaps()
	if err == nil && !caps.CanTrace() {
		err = fmt.Errorf("%s: eBPF needs CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN", caps)
	}
	add("capabilities", err, caps.String())
	add("btf", tracker.CheckBTF(), tracker.VmlinuxBTF)
	kernel, seal := kernelCheck()
	rep.Seal = seal
	rep.Checks = append(rep.Checks, kernel)
	detail, err := cgroupV2()
	add("cgroup v2", err, detail)
	add("pidfd", tracker.CheckPidfd(), "pidfd_open works")
	add("subreaper", tracker.CheckSubreaper(), "PR_SET_CHILD_SUBREAPER available")
	var fsErr error
	fsDetail := "mounted at " + tracker.BPFFS
	if !tracker.BPFFSMounted() {
		fsErr = fmt.Errorf("not mounted at %s; gpu-hold mounts it when it pins a lineage (as root)", tracker.BPFFS)
	}
	add("bpffs", fsErr, fsDetail)
	add("bpf spares", nil, sparesDetail())
	add("bpf iterators", nil, itersDetail())
	watch, err := watchDetail()
	add("device watch", err, watch)
	return rep
}

// watchDetail says whether the device-holder check reads only the
// openers' fd tables (the host's device watch) or every one, and what the
// watch has counted; lost openers or dentries mean the next check reads
// every fd table again.
func watchDetail() (string, error) {
	st, err := tracker.DeviceWatchStatus()
	if err != nil {
		return "", fmt.Errorf("%w; remove the directory as root and the next hold with devices pins a new watch", err)
	}
	if !st.Pinned {
		return "not attached yet: the first device check of a root hold with devices attaches it (" + st.Dir + "); until then each check reads every fd table", nil
	}
	n := st.Now
	lost := ""
	if n.LostOpeners > st.AtSeed.LostOpeners || n.LostDentries > st.AtSeed.LostDentries {
		lost = "; maps were full since the last seed: the next check reads every fd table"
	}
	calls := "; a holder asleep in a read or ioctl of its device makes that device's checks read every fd table (the kernel refused the fentry hooks that would let the watch credit the call)"
	if st.Installs {
		calls = "; it credits a holder's calls asleep on the device"
	}
	return fmt.Sprintf("attached (%s): %d device(s) checked, %d opener(s), %d node dentries; %d opens, %d forks of openers, %d openers and %d dentries lost to full maps%s%s",
		st.Dir, st.Devices, st.Openers, st.Dentries, n.Opens, n.Forks, n.LostOpeners, n.LostDentries, lost, calls), nil
}

// itersDetail says whether an eBPF hold opens the host's iterators or
// loads its own: without the group list its teardown walks /proc.
func itersDetail() string {
	devscan, groups := tracker.IteratorsPinned()
	if devscan && groups {
		return "device scan and process groups pinned: a hold opens them, and an eBPF teardown reads the payload's group from the kernel instead of walking /proc"
	}
	return fmt.Sprintf("device scan pinned: %v, process groups pinned: %v; the spare maker pins both (in %s) when the next eBPF hold ends with the stock low", devscan, groups, tracker.SpareRoot())
}

// sparesDetail says how many loaded eBPF lineages wait for the next holds.
func sparesDetail() string {
	if n := tracker.SpareCount(); n > 0 {
		return fmt.Sprintf("%d ready in %s: a hold takes one instead of loading its programs", n, tracker.SpareRoot())
	}
	return "none yet: the next eBPF hold loads its own programs, then makes spares (" + tracker.SpareRoot() + ")"
}

// kernelCheck is the kernel row: the release, whether it is at least the
// eBPF tracker's floor, and the seal the tracker gets here.
func kernelCheck() (doctorCheck, string) {
	c := doctorCheck{Name: "kernel", OK: true, Detail: tracker.KernelRelease()}
	if err := tracker.CheckKernel(); err != nil {
		c.OK, c.Detail = false, err.Error()
	}
	seal, err := tracker.Seal()
	if err != nil {
		c.Detail += "; seal: " + err.Error()
		return c, ""
	}
	c.Detail += "; seal: " + seal.String()
	return c, string(seal.Mode)
}

// unwrapProbe drops the "X tracker unavailable:" prefix: the row names the backend.
func unwrapProbe(err error) error {
	if pe, ok := err.(*tracker.ProbeError); ok {
		return fmt.Errorf("%s", pe.Reason)
	}
	return err
}

// cgroupV2 finds the cgroup v2 mount and whether cgroup.kill exists there
// (Linux 5.14+; the root cgroup has none, so a child cgroup is checked).
func cgroupV2() (string, error) {
	mnt := cgroup.Mount()
	if mnt == "" {
		return "", fmt.Errorf("no cgroup v2 mount: payloads run without a cgroup of their own")
	}
	own := cgroup.Own()
	candidates := []string{filepath.Join(mnt, own, "cgroup.kill")}
	if more, _ := filepath.Glob(filepath.Join(mnt, own, "*", "cgroup.kill")); len(more) > 0 {
		candidates = append(candidates, more[0])
	}
	for _, c := range candidates {
		if _, err := os.Stat(c); err == nil {
			return mnt + " (cgroup.kill available)", nil
		}
	}
	if filepath.Clean(own) == "/" {
		return "", fmt.Errorf("%s has no child cgroup with cgroup.kill to check (needs Linux 5.14+)", mnt)
	}
	return "", fmt.Errorf("%s has no cgroup.kill (needs Linux 5.14+): teardown cannot end the cgroup atomically", mnt)
}

// doctorResources lists the resources configured for queue dir dir (the
// defaults when there is none), their nodes here and who holds them.
func doctorResources(dir string) []doctorResource {
	var warned []doctorResource
	res, err := device.LoadResourcesWarn(dir, func(m string) { warned = append(warned, doctorResource{Name: "(config)", Error: m}) })
	if err != nil {
		return []doctorResource{{Name: "(config)", Error: err.Error()}}
	}
	names := make([]string, 0, len(res))
	for name := range res {
		names = append(names, name)
	}
	sort.Strings(names)
	out := warned // an untrusted resources.json: the defaults below
	for _, name := range names {
		r := doctorResource{Name: name}
		patterns := device.Patterns(res[name], nil)
		nodes, err := device.Expand(patterns)
		for _, n := range nodes {
			r.Nodes = append(r.Nodes, n.Path)
		}
		if err == nil && len(nodes) > 0 {
			r.Holders, err = device.ScanHolders(patterns)
		}
		if err != nil {
			r.Error = err.Error()
		}
		if p := device.PoolOf(res[name], "/"); p.Multi() {
			r.Pool = &p
		}
		out = append(out, r)
	}
	return out
}
