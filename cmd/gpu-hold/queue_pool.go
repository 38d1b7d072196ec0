// queue_pool.go owns `gpu-hold queue` for a pool resource: each device
// with the hold that has it (and until when it is bound to), then the pool
// tickets running and waiting, and what the first in line waits for, with
// why a holder keeps a device and who locks one with no ticket; with
// --json, queue.PoolStatus.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/device"
	"github.com/gpu-hold/gpu-hold/queue"
)

// poolQueue lists a pool resource; done is false for a resource that is
// not a pool (the token listing applies).
func poolQueue(opts *queueOptions) (done bool, err error) {
	g := opts.g
	dir, err := g.findDir()
	if err != nil {
		return true, err
	}
	res, err := device.LoadResourcesWarn(dir, g.warn)
	if err != nil {
		return true, usageErr("%w", err)
	}
	pool := device.PoolOf(device.LookupResource(res, g.Resource), "/")
	if !pool.Multi() {
		return false, nil
	}
	var names []string
	for _, d := range pool.Devices {
		names = append(names, device.QueueName(g.Resource, d))
	}
	st := queue.PoolStatus{Resource: g.Resource, Running: []queue.Ticket{}, Waiters: []queue.Ticket{}}
	p, err := queue.OpenPool(dir, g.Resource, names, !pool.NoBackfill, queue.DirOptions{NoCreate: true, Warn: g.warn})
	switch {
	case errors.Is(err, queue.ErrNoResource):
		for i := range pool.Devices {
			st.Devices = append(st.Devices, queue.DeviceStatus{Index: i})
		}
	case err != nil:
		return true, usageErr("%w", err)
	default:
		defer p.Close()
		if st, err = p.Status(); err != nil {
			return true, usageErr("%w", err)
		}
	}
	if opts.JSON {
		enc := json.NewEncoder(opts.Out)
		enc.SetIndent("", "  ")
		return true, enc.Encode(st)
	}
	printPool(opts.Out, pool, st, opts.Now())
	return true, nil
}

func printPool(out io.Writer, pool device.Pool, st queue.PoolStatus, now time.Time) {
	fmt.Fprintf(out, "%s: pool of %d devices\n", st.Resource, len(pool.Devices))
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DEV\tNAME\tHELD BY\tPID\tUSER\tHELD\tBOUND TO")
	for i, d := range st.Devices {
		name := "-"
		if i < len(pool.Devices) {
			name = pool.Devices[i].Name
		}
		switch h := d.Holder; {
		case h != nil:
			bound := "no max hold"
			if !d.Until.IsZero() {
				bound = d.Until.Format(time.TimeOnly)
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\t%s\n", i, name, holderCell(*h), h.Holder.PID, userName(h.UID), age(now.Sub(h.Granted)), bound)
		case len(d.Dead) > 0:
			fmt.Fprintf(tw, "%d\t%s\tdead: %s\t%d\t%s\t-\t-\n", i, name, cell(d.Dead[0].Label, 24), d.Dead[0].Holder.PID, userName(d.Dead[0].UID))
		default:
			fmt.Fprintf(tw, "%d\t%s\tfree\t-\t-\t-\t-\n", i, name)
		}
	}
	tw.Flush()
	printDeviceNotes(out, pool, st)
	if len(st.Running)+len(st.Waiters) == 0 {
		fmt.Fprintln(out, "nobody waiting")
		return
	}
	fmt.Fprintln(out)
	tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POS\tTICKET\tSTATE\tDEVICES\tLABEL\tPID\tUSER\tAGE\tCOMMAND")
	for _, t := range st.Running {
		fmt.Fprintf(tw, "-\t%d\trunning\t%s\t%s\t%d\t%s\t%s\t%s\n", t.Seq, indices(t.Devices), cell(t.Label, 24), t.Holder.PID, userName(t.UID), age(now.Sub(t.Created)), command(t.Cmd))
	}
	for i, t := range st.Waiters {
		fmt.Fprintf(tw, "%d\t%d\twaiting\t%d wanted\t%s\t%d\t%s\t%s\t%s\n", i+1, t.Seq, max(t.Count, 1), cell(t.Label, 24), t.Holder.PID, userName(t.UID), age(now.Sub(t.Created)), command(t.Cmd))
	}
	tw.Flush()
	if st.HeadWaits != "" {
		fmt.Fprintf(out, "ticket %d: %s\n", st.Waiters[0].Seq, st.HeadWaits)
	}
}

// printDeviceNotes says, under the device table, why a device's holder
// keeps its token after its payload ended, and who holds a device's locks
// with no ticket.
func printDeviceNotes(out io.Writer, pool device.Pool, st queue.PoolStatus) {
	for i, d := range st.Devices {
		name := strconv.Itoa(i)
		if i < len(pool.Devices) {
			name += " (" + cell(pool.Devices[i].Name, 24) + ")"
		}
		if d.Keeping != nil {
			fmt.Fprintf(out, "device %s: %s, since %s\n", name, d.Keeping.Line(), d.Keeping.Since.Format(time.TimeOnly))
		}
		for _, l := range lockersOf(d.Lockers) {
			fmt.Fprintf(out, "device %s: %s\n", name, l.line())
		}
	}
}

// holderCell names a device's holder: its label and its pool ticket.
func holderCell(t queue.Ticket) string {
	s := cell(t.Label, 24)
	if t.PoolSeq != 0 {
		s += " (ticket " + strconv.FormatUint(t.PoolSeq, 10) + ")"
	}
	return s
}

func indices(idx []int) string {
	var s []string
	for _, i := range idx {
		s = append(s, strconv.Itoa(i))
	}
	return strings.Join(s, ",")
}
