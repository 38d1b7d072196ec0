// root.go owns a test process's private spare root: the spares, iterators
// and device watch its tests and the holds they start pin there instead of
// in the host's root, which real holds and other packages' tests use.
package teststock

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/proc"
)

// spareRootEnv is bpf.SpareRootEnv (bpf's own tests import this package).
const spareRootEnv = "GPU_HOLD_TEST_SPARE_ROOT"

// rootPrefix is what bpf accepts as a test's root (bpf.validTestRoot).
const rootPrefix = "/sys/fs/bpf/gpu-hold-test-"

// PrivateRoot names this process's own spare root in the environment, which
// this process and every hold and spare maker it starts read; first it
// removes the roots of test processes that are gone. The returned func
// removes the root: call it once m.Run has returned. Without a BPF
// filesystem at /sys/fs/bpf it does nothing (the BPF tests skip there).
func PrivateRoot() (remove func()) {
	var fs unix.Statfs_t
	if os.Geteuid() != 0 || unix.Statfs("/sys/fs/bpf", &fs) != nil || uint32(fs.Type) != unix.BPF_FS_MAGIC {
		return func() {}
	}
	sweepRoots()
	self, err := proc.ReadStat(os.Getpid())
	if err != nil {
		return func() {}
	}
	root := fmt.Sprintf("%s%d-%d", rootPrefix, self.PID, self.Start)
	os.Setenv(spareRootEnv, root)
	return func() { os.RemoveAll(root) }
}

// sweepRoots removes the private roots whose test process is gone (a spare
// maker started by one of its holds may have pinned there after it ended).
func sweepRoots() {
	roots, _ := filepath.Glob(rootPrefix + "*")
	for _, root := range roots {
		pid, start, ok := strings.Cut(strings.TrimPrefix(root, rootPrefix), "-")
		p, perr := strconv.Atoi(pid)
		s, serr := strconv.ParseUint(start, 10, 64)
		if !ok || perr != nil || serr != nil {
			continue
		}
		if st, err := proc.ReadStat(p); err == nil && st.Start == s && !st.Dead() {
			continue
		}
		os.RemoveAll(root)
	}
}
