// probe_host.go owns the host facts the backends depend on, each checked on
// its own so that `gpu-hold doctor` can show them: capabilities, kernel
// release and the seal it gives, kernel BTF, pidfds, subreapers.
package tracker

import (
	"github.com/gpu-hold/gpu-hold/bpf"

	"fmt"
	"os"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// VmlinuxBTF is where the kernel publishes its own BTF.
const VmlinuxBTF = "/sys/kernel/btf/vmlinux"

// Caps are the effective capabilities the backends care about.
type Caps struct {
	SysAdmin bool `json:"cap_sys_admin"`
	BPF      bool `json:"cap_bpf"`
	Perfmon  bool `json:"cap_perfmon"`
	Kill     bool `json:"cap_kill"`
	Ptrace   bool `json:"cap_sys_ptrace"` // procfs reads other users' zombies' exit statuses
}

// CanTrace reports whether the caps allow loading and attaching tracing programs.
func (c Caps) CanTrace() bool { return c.SysAdmin || (c.BPF && c.Perfmon) }

func (c Caps) String() string {
	var s []string
	for _, x := range []struct {
		on   bool
		name string
	}{{c.BPF, "CAP_BPF"}, {c.Perfmon, "CAP_PERFMON"}, {c.SysAdmin, "CAP_SYS_ADMIN"}, {c.Kill, "CAP_KILL"}} {
		if x.on {
			s = append(s, x.name)
		}
	}
	if len(s) == 0 {
		return "none of CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN, CAP_KILL"
	}
	return strings.Join(s, " ")
}

// EffectiveCaps reads this process's effective capabilities.
func EffectiveCaps() (Caps, error) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return Caps{}, fmt.Errorf("capget: %w", err)
	}
	has := func(c int) bool { return data[c/32].Effective&(1<<(uint(c)%32)) != 0 }
	return Caps{
		SysAdmin: has(unix.CAP_SYS_ADMIN),
		BPF:      has(unix.CAP_BPF),
		Perfmon:  has(unix.CAP_PERFMON),
		Kill:     has(unix.CAP_KILL),
		Ptrace:   has(unix.CAP_SYS_PTRACE),
	}, nil
}

// KernelRelease is uname -r.
func KernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "unknown"
	}
	return unix.ByteSliceToString(u.Release[:])
}

// CheckBTF says whether the kernel publishes BTF (CONFIG_DEBUG_INFO_BTF),
// which tp_btf programs and CO-RE need.
func CheckBTF() error {
	if _, err := os.Stat(VmlinuxBTF); err != nil {
		return fmt.Errorf("no kernel BTF at %s (kernel built without CONFIG_DEBUG_INFO_BTF)", VmlinuxBTF)
	}
	return nil
}

// KernelFloor is the oldest kernel release the eBPF tracker is meant for:
// BPF memory is charged to the memory cgroup from 5.11 on (before, to
// RLIMIT_MEMLOCK, which gpu-hold does not raise); everything else it uses
// is older (docs/TRACKERS.md's table of kernel features).
var KernelFloor = [2]int{5, 11}

// CheckKernel says whether this kernel is at least KernelFloor. The load
// test (ProbeBPF) decides whether eBPF works; this says why it may not.
func CheckKernel() error { return checkKernel(KernelRelease()) }

func checkKernel(rel string) error {
	var major, minor int
	if _, err := fmt.Sscanf(rel, "%d.%d", &major, &minor); err != nil {
		return fmt.Errorf("cannot read the kernel release %q", rel)
	}
	if major < KernelFloor[0] || major == KernelFloor[0] && minor < KernelFloor[1] {
		return fmt.Errorf("%s is older than %d.%d, which the eBPF tracker needs (run `ulimit -l unlimited` first on 5.8 to 5.10; procfs works on any)", rel, KernelFloor[0], KernelFloor[1])
	}
	return nil
}

// CheckFloor is the floor as the eBPF backend's probes apply it: below
// KernelFloor the programs' maps count against RLIMIT_MEMLOCK, so only an
// unlimited one lets them load (the load then has the last word). The
// probe's own load does not tell: its maps are small enough to fit under
// the usual limit, and a hold's are not.
func CheckFloor() error {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &rl); err != nil {
		rl.Cur = 0 // unknown: as good as limited
	}
	return checkFloor(KernelRelease(), rl.Cur)
}

// checkFloor is CheckFloor for a release and a RLIMIT_MEMLOCK.
func checkFloor(rel string, memlock uint64) error {
	err := checkKernel(rel)
	if err == nil || memlock == unix.RLIM_INFINITY {
		return nil
	}
	return err
}

// Seal says which seal the eBPF tracker gets on this host and why (see
// bpf.HostSeal): "kill at birth (bpf_send_signal_task)", or "kill at fork,
// children by the KILL pass (no bpf_send_signal_task: Linux < 6.13)".
func Seal() (bpf.SealChoice, error) { return bpf.HostSeal() }

// initPidNSIno is the inode number the kernel gives the initial pid
// namespace (PROC_PID_INIT_INO), a constant of its ABI.
const initPidNSIno = 0xEFFFFFFC

// CheckHostPidNS says whether this process runs in the host's pid
// namespace. The BPF programs see host pids; a hold in a container's pid
// namespace would compare them to its own and never find the payload.
func CheckHostPidNS() error {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/pid", &st); err != nil {
		return fmt.Errorf("cannot tell which pid namespace this is (/proc/self/ns/pid: %v)", err)
	}
	if st.Ino != initPidNSIno {
		return fmt.Errorf("gpu-hold runs in a pid namespace other than the host's (pid:[%d]), whose pids the BPF programs do not see; run it in the host's pid namespace", st.Ino)
	}
	return nil
}

// CheckPidfd says whether pidfd_open works (Linux 5.3+).
func CheckPidfd() error {
	fd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		return fmt.Errorf("pidfd_open failed: %v (needs Linux 5.3+)", err)
	}
	unix.Close(fd)
	return nil
}

// CheckSubreaper says whether prctl(PR_*_CHILD_SUBREAPER) is available. It
// only reads the flag; it does not make this process a subreaper.
func CheckSubreaper() error {
	var v int32
	if err := unix.Prctl(unix.PR_GET_CHILD_SUBREAPER, uintptr(unsafe.Pointer(&v)), 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_GET_CHILD_SUBREAPER) failed: %v", err)
	}
	return nil
}

// BPFFS is where the BPF filesystem is mounted for pins.
const BPFFS = bpf.BPFFS

// BPFFSMounted reports whether the BPF filesystem is mounted at BPFFS.
func BPFFSMounted() bool { return bpf.BPFFSMounted() }
