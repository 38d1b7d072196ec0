// stepaside.go owns the hold's priority once its token is released: what
// it still does then (its lineage given back to the spares, its cgroup
// removed, its metrics and records written) is no one's critical path,
// while the next hold's launch is the device's idle time.
package hold

import (
	"os"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/proc"
)

// asideNice is the nice value a hold takes once released: the lowest,
// which still runs it whenever a CPU is free (SCHED_IDLE would let a busy
// host starve its exit), and gives way to anything else.
const asideNice = 19

// stepAside lowers every thread of this process to asideNice. Threads the
// runtime makes later inherit it from the thread that makes them.
func stepAside() {
	tids, _ := proc.Threads(os.Getpid())
	for _, tid := range tids {
		unix.Setpriority(unix.PRIO_PROCESS, tid, asideNice)
	}
}
