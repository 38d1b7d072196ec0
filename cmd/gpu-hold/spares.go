// spares.go owns the hidden `gpu-hold make-spares` command: what a hold
// starts, detached, to keep the stock of loaded eBPF lineages that the
// next holds take instead of loading their own.
package main

import (
	"os"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/hold"
	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/tracker"
)

func newCmdMakeSpares() *cobra.Command {
	return &cobra.Command{
		Use:    hold.MakeSparesCommand,
		Short:  "Load and pin spare eBPF lineages for the next holds (started by a hold)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			idlePriority()
			if _, err := tracker.MakeSpares(); err != nil {
				return usageErr("making eBPF spares: %v; holds load their own meanwhile", err)
			}
			return nil
		},
	}
}

// idlePriority moves every thread of this process to SCHED_IDLE: the maker
// runs on what the CPUs have left, never beside a hold's teardown or a
// payload. Threads made later inherit it from their maker.
func idlePriority() {
	tids, _ := proc.Threads(os.Getpid())
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_IDLE}
	for _, tid := range tids {
		unix.SchedSetAttr(tid, &attr, 0)
	}
}
