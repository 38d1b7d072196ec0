// run.go owns the root command itself, `gpu-hold [flags] -- CMD [ARGS...]`:
// its flags, parsed into hold.Options, and the hold's exit code.
package main

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"github.com/gpu-hold/gpu-hold/hold"
	"github.com/gpu-hold/gpu-hold/internal/device"
	"github.com/gpu-hold/gpu-hold/internal/fleetenv"
	"github.com/gpu-hold/gpu-hold/internal/lobby"
	"github.com/gpu-hold/gpu-hold/internal/memfloor"
)

type runOptions struct {
	g        *globalOpts
	o        hold.Options
	memFloor string
	dashAt   int
}

// newCmdRun builds the root command. runF, when not nil, runs instead of
// runRun (gh's seam): a test sees the parsed options without starting a
// hold.
func newCmdRun(g *globalOpts, runF func(context.Context, *runOptions, []string) error) *cobra.Command {
	opts := &runOptions{g: g}
	o := &opts.o
	cmd := &cobra.Command{
		Use:   "gpu-hold [flags] -- CMD [ARGS...]",
		Short: "Run a command under an exclusive resource token and end everything it started",
		Long: `gpu-hold queues for an exclusive token on a resource (FIFO), runs CMD tracked from its
first instruction, and when the hold ends (CMD exited, --max-hold ran out, or the hold was
signalled) ends every process CMD created, TERM first and KILL after --grace, checks that nothing
still holds the device, writes a record, and only then releases the token.`,
		Example: `  gpu-hold -l bench -t 2h -w 45m -- ./bench.sh model.gguf
  gpu-hold queue -r gpu`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.dashAt = cmd.ArgsLenAtDash()
			o.LostGraceGiven = cmd.Flags().Changed("lost-grace")
			if runF != nil {
				return runF(cmd.Context(), opts, args)
			}
			return runRun(cmd.Context(), opts, args)
		},
	}
	f := cmd.Flags()
	f.SetInterspersed(false)
	f.StringVarP(&o.Label, "label", "l", "", "label shown in the queue and the record")
	durationVarP(f, &o.MaxHold, "max-hold", "t", 0, "end the hold after this long (0: no limit)")
	durationVarP(f, &o.Wait, "wait", "w", 0, "give up (exit 75) if the token is not ours within this long (0: wait for ever)")
	durationVarP(f, &o.Grace, "grace", "g", 10*time.Second, "time between TERM and KILL at teardown")
	durationVarP(f, &o.SurvivorWait, "survivor-wait", "", 30*time.Second, "how long to wait for processes that do not die on KILL before recording them as survivors")
	choiceVar(f, &o.Track, "track", "tracker backend: auto (eBPF when it can load, else procfs), bpf, proc; a bare --track means bpf", trackValues...)
	f.Lookup("track").NoOptDefVal = "bpf"
	choiceVar(f, &o.Cgroup, "cgroup", "start the payload in a cgroup of its own: auto (when the host allows), on (required), off", "auto", "on", "off")
	f.StringVar(&o.Dump, "dump", "", "write the hold's record here (default: the resource's records directory)")
	f.IntVar(&o.KeepRecords, "keep-records", 200, "your own finished records kept per resource; older ones of yours are removed (0: no count limit). Other users' records are theirs: the admin sets the whole directory's retention in <dir>/settings.json")
	durationVarP(f, &o.RecordAge, "record-age", "", 30*24*time.Hour, "your own finished records older than this are removed (0: no age limit)")
	f.IntVarP(&o.Count, "count", "n", 1, "devices of the resource's pool to hold, all at once (gpu-hold doctor lists the pool)")
	f.StringArrayVar(&o.Devices, "device", nil, "device node (or glob) whose holders are checked at release; repeatable; replaces the resource's list")
	choiceVar(f, (*string)(&o.DeviceHolders), "device-holders", "when a process outside the lineage still holds the device after teardown: warn, wait, fail (exit 73); wait and fail keep the token until it lets go",
		string(device.PolicyWarn), string(device.PolicyWait), string(device.PolicyFail))
	durationVarP(f, &o.DeviceWait, "device-wait", "", 30*time.Second, "with --device-holders=wait, how long to wait for them to let go before reporting them")
	f.StringVar(&opts.memFloor, "mem-floor", "", "end the hold (exit 72) when available memory falls below this (e.g. 8G); default $GPU_HOLD_MEM_ABORT_GIB GiB")
	f.StringVar(&o.MetricsDir, "metrics-dir", "", "write node_exporter textfile metrics for the resource here")
	f.BoolVar(&o.Yield, "yield", false, "serve keeper: take the token only while no job waits, and give it up (exit 79) as soon as one queues")
	f.BoolVar(&o.Restart, "restart", false, "with --yield: queue again after each end, until a signal")
	addLostGraceFlag(f, o)
	return cmd
}

func runRun(ctx context.Context, opts *runOptions, args []string) error {
	if opts.dashAt < 0 {
		if len(args) == 0 {
			return usageErr("no command: give it after --, e.g. gpu-hold -t 1h -- ./job.sh (see gpu-hold --help)")
		}
		return usageErr("put the command after --: gpu-hold [flags] -- %s ... (an unknown subcommand or a missing -- gives this error)", args[0])
	}
	if opts.dashAt > 0 {
		return usageErr("unexpected argument %q before --: flags go before --, the command after it", args[0])
	}
	if len(args) == 0 {
		return usageErr("no command after --: gpu-hold [flags] -- CMD [ARGS...]")
	}
	g, o := opts.g, &opts.o
	o.Cmd = args
	var err error
	if o.Resume, err = lobby.TakeResume(); err != nil {
		return usageErr("%v", err)
	}
	o.Resource = g.Resource
	o.Log = g.Log
	floor, err := memfloor.Resolve(opts.memFloor)
	if err != nil {
		return usageErr("%v", err)
	}
	o.MemFloor = floor
	if o.Count < 1 {
		return usageErr("--count must be at least 1 (got %d): it is how many of the pool's devices to hold", o.Count)
	}
	if o.Etcd, err = g.etcdFleet(); err != nil {
		return err
	}
	if err := o.Validate(); err != nil {
		return usageErr("%v", err)
	}
	dir, err := g.queueDir()
	if err != nil {
		return err
	}
	if err := fleetenv.HoldResource(dir, o.Resource); err != nil {
		return usageErr("%w", err) // before anything is queued or created
	}
	o.Dir = dir
	if isatty.IsTerminal(os.Stderr.Fd()) && g.LogFormat != "json" { // JSON mode draws nothing
		o.Status = os.Stderr
	}
	if ctx == nil {
		ctx = context.Background()
	}
	res, err := hold.Keep(ctx, *o)
	if err != nil {
		var he *hold.Error
		if errors.As(err, &he) {
			return &exitError{code: he.Code, err: he.Err}
		}
		return usageErr("%w", err)
	}
	if res.Code != 0 {
		return &exitError{code: res.Code}
	}
	return nil
}

// fixTrackArg turns `--track VALUE` into `--track=VALUE` when VALUE is a
// backend name: a bare --track means bpf, so pflag would otherwise read
// `--track proc` as --track=bpf followed by an argument "proc".
func fixTrackArg(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		if a == "--track" && i+1 < len(args) && trackValue(args[i+1]) { // procc too: its error says "did you mean"
			out = append(out, "--track="+args[i+1])
			i++
			continue
		}
		out = append(out, a)
	}
	return out
}
