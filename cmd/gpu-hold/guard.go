// guard.go owns `gpu-hold guard`: the long-running service that names (and
// with --enforce ends) every process holding a resource's device without
// the token; its flags, parsed into guard.Options.
package main

import (
	"context"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpu-hold/gpu-hold/internal/fleetenv"
	"github.com/gpu-hold/gpu-hold/internal/guard"
	"github.com/gpu-hold/gpu-hold/queue"
)

type guardOptions struct {
	g         *globalOpts
	o         guard.Options
	allowPath string
	resSet    bool // -r was given: guard that resource only
}

func newCmdGuard(g *globalOpts) *cobra.Command {
	opts := &guardOptions{g: g}
	o := &opts.o
	cmd := &cobra.Command{
		Use:   "guard [--enforce] [--allow FILE] [--audit FILE] [--metrics-dir DIR] [--period DUR]",
		Short: "Name (and with --enforce end) every process that holds a device without the token",
		Long: `Every --period, find the processes that hold a device node of each guarded resource (every
resource with device nodes, or -r RES), and name each that is neither in the lineage of the
resource's current token holder (its gpu-hold process's descendants, its cgroup) nor allow-listed
(--allow). Each is logged once, written to the audit log, and exported as metrics, with the
fleet metric gpu_hold_guard_untokened_device_seconds_total (device-seconds without a token, per
user). With --enforce each is ended: TERM, --grace, KILL, through a pidfd opened after its
identity (pid, start time) was checked, and judged again before each signal. Run it as root
(dist/systemd/gpu-hold-guard.service).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.resSet = cmd.Flags().Changed("resource")
			return guardRun(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.Enforce, "enforce", false, "end the processes found (TERM, --grace, KILL); needs --audit")
	durationVarP(f, &o.Period, "period", "", 2*time.Second, "time between two scans of the device holders")
	durationVarP(f, &o.Grace, "grace", "g", 10*time.Second, "with --enforce, time between TERM and KILL")
	f.StringVar(&opts.allowPath, "allow", "", `allow-list (JSON: {"allow": [{"exe": "/usr/lib/xorg/Xorg"}, {"uid": 990}]}), root's file`)
	f.StringVar(&o.AuditPath, "audit", "", "append a JSON line per process found and per action on it to this file")
	f.StringVar(&o.MetricsDir, "metrics-dir", "", "write the textfile "+guard.TextfileName+" here after every scan")
	f.BoolVar(&o.Once, "once", false, "scan once and exit")
	f.BoolVar(&o.DenyAtOpen, "deny-at-open", false, "also refuse, in the kernel (eBPF on the cgroup v2 root), every open of a guarded node by a process outside the holders' lineage and the allow-list; detached when the guard exits")
	return cmd
}

func guardRun(ctx context.Context, opts *guardOptions) error {
	o := &opts.o
	if o.Grace < 0 {
		return usageErr("--grace must not be negative (got %v)", o.Grace)
	}
	dir, err := opts.g.queueDir()
	if err != nil {
		return err
	}
	o.Dir, o.Log = dir, opts.g.Log
	if opts.resSet {
		o.Resources = []string{opts.g.Resource}
	}
	if opts.allowPath != "" {
		if o.Allow, err = guard.LoadAllowList(opts.allowPath); err != nil {
			return usageErr("%v", err)
		}
	}
	fq, err := opts.g.etcdFleet()
	if err != nil {
		return err
	}
	if fq != nil {
		// The fleet queue: holders are read from etcd, and only those of
		// this host have a lineage here.
		o.OpenQueue = func(resource string) (queue.Queue, error) { return fq.Open(resource, opts.g.warn) }
		o.Host = fleetenv.TicketHost()
	}
	gd, err := guard.New(*o)
	if err != nil {
		return usageErr("%v", err)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer stop()
	if err := gd.Run(ctx); err != nil {
		return usageErr("%v", err)
	}
	return nil
}
