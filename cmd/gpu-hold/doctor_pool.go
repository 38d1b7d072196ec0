// doctor_pool.go owns doctor's listing of the device pools: each pool's
// devices with their nodes and ids (what -n takes from), and the nodes
// they share.
package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/gpu-hold/gpu-hold/internal/device"
)

func printPools(out io.Writer, res []doctorResource) {
	for _, r := range res {
		p := r.Pool
		if p == nil {
			continue
		}
		bf := "backfill on"
		if p.NoBackfill {
			bf = "strict FIFO (backfill off)"
		}
		fmt.Fprintf(out, "\npool %s: %d devices, %s (gpu-hold -r %s -n N takes N of them)\n", r.Name, len(p.Devices), bf, r.Name)
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "DEV\tNAME\tKIND\tUUID\tPCI\tNODES")
		for _, d := range p.Devices {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", d.Index, d.Name, d.Kind, orDash(d.UUID), orDash(d.PCI), strings.Join(d.Nodes, " "))
		}
		tw.Flush()
		if len(p.Shared) > 0 {
			fmt.Fprintf(out, "shared by all (always allowed): %s\n", strings.Join(p.Shared, " "))
		}
	}
}

// poolDirs are the device queues of r's pool: in a shared queue dir an
// admin makes them, like every resource dir (a user's would be refused by
// the others' holds).
func poolDirs(r doctorResource) []string {
	if r.Pool == nil {
		return nil
	}
	var out []string
	for _, d := range r.Pool.Devices {
		out = append(out, device.QueueName(r.Name, d))
	}
	return out
}
