// spares.go owns restocking the eBPF spares: once a hold's tracker is
// closed (after the release; its lineage given back to the spares when it
// could be), it starts a detached `gpu-hold make-spares` when the stock is
// still low, so that the next hold takes a loaded copy instead of loading
// one while the device waits. Started earlier, while the payload ran, the
// maker refilled the stock with a fresh load before the hold could give
// its own lineage back, which was then freed: a load per hold, for nothing.
package hold

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/tracker"
)

// MakeSparesCommand is the hidden subcommand that makes the spares.
const MakeSparesCommand = "make-spares"

// restockSpares starts the maker when tr is eBPF's and spares are few. The
// maker gets no environment but the seal request (and a test's spare
// root, tracker.SpareRootEnv), so no marker, label or
// hold id of this hold's reaches it; it is in a session of its own.
func (h *holdRun) restockSpares(tr *tracker.Lineage) {
	if tr.Backend() != tracker.BackendBPF || !tracker.SparesLow() {
		return
	}
	cmd := exec.Command("/proc/self/exe", MakeSparesCommand)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	for _, name := range []string{tracker.SealEnv, tracker.SpareRootEnv} {
		if v, ok := os.LookupEnv(name); ok {
			cmd.Env = append(cmd.Env, name+"="+v)
		}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := startIdle(cmd); err != nil {
		h.o.Log.Debug().Err(err).Msg("cannot start the eBPF spare maker; the next hold loads its own")
		return
	}
	go cmd.Wait()
}

// startIdle starts cmd and moves it to SCHED_IDLE at once, before its Go
// runtime has started much: started after the release, the maker would
// otherwise take a CPU from the next hold's launch until it lowers its
// own priority (which it does for the threads it has by then). Forking it
// from a thread of ours set to SCHED_IDLE would not do: the Go runtime may
// make its template thread from that one, and every thread made from it
// later would run at SCHED_IDLE in this process.
func startIdle(cmd *exec.Cmd) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_IDLE}
	if err := unix.SchedSetAttr(cmd.Process.Pid, &attr, 0); err != nil {
		return fmt.Errorf("setting the maker (pid %d) to SCHED_IDLE: %w", cmd.Process.Pid, err)
	}
	return nil
}
