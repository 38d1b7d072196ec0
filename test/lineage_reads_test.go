// lineage_reads_test.go tests, end to end as root, that a procfs hold's
// teardown reads the lineage from the kernel's lists of children (and the
// group and the cgroup from the kernel) instead of walking every process
// of the host, and that reading the lists alone still ends every member.
package test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/testenv"
	"github.com/gpu-hold/gpu-hold/tracker"
)

// Catches: a procfs teardown that walks /proc where the kernel lists what
// it needs (its cost then grows with the host, not the hold), and one that,
// reading the lists, misses a member: one left in the cgroup, one that
// ignores TERM, one in a session of its own that moved to another cgroup
// (E17's shape: only the lineage still has it).
func TestProcTeardownReadsTheLineage(t *testing.T) {
	testenv.NeedRoot(t, "a cgroup for the payload and the kernel's group walk")
	if !cgroupFS(unifiedRoot, cgroupV2Magic) {
		testenv.Need(t, "no cgroup v2 at %s", unifiedRoot)
	}
	needGroupWalk(t)
	t.Parallel()
	rg := rig{Name: "proc", Track: []string{"--track=proc"}}
	for _, grace := range []string{"1s", "0"} {
		t.Run("grace-"+grace, func(t *testing.T) {
			t.Parallel()
			mark := newMark(t)
			d, q := rg.dirs(t)
			cgroupLeaver(t, d, mark)
			payload := script(t, d, "root.sh", `setsid bash "$GH_T/member.sh" &
await member
sleep 301 &
(trap "" TERM; exec sleep 302) &
exit 0
`)
			h := rg.start(t, q, mark, d, holdArgs(payload, "-g", slowText(grace))...)
			readPid(t, filepath.Join(d, "member"), 10*time.Second)
			e := requireEnd(t, h.Wait(20*time.Second), 0, false)
			requireNoneLeft(t, mark)
			if e.Kill < 1 || !e.CgroupKilled {
				t.Errorf("\"hold ended\" says kill %d, cgroup_killed %v: want the member outside the cgroup KILLed on its own, and the cgroup killed", e.Kill, e.CgroupKilled)
			}
			if e.ProcWalks != 0 {
				t.Errorf("\"hold ended\" says the teardown walked /proc %d times: want the lineage, group and cgroup read from the kernel's lists alone", e.ProcWalks)
			}
		})
	}
}

// needGroupWalk makes sure this host's process-group iterator is pinned,
// as an eBPF hold's spare maker leaves it: a procfs hold then asks the
// kernel for its payload's group instead of walking /proc for it, whatever
// the host's size.
func needGroupWalk(t *testing.T) {
	t.Helper()
	if !hasBackend(t, "bpf") {
		testenv.Need(t, "no eBPF backend here: the kernel's group walk is a BPF iterator")
	}
	deadline := time.Now().Add(slowed(30 * time.Second))
	for {
		if _, groups := tracker.IteratorsPinned(); groups {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the process-group iterator is not pinned after %v of eBPF holds (their spare maker pins it)", slowed(30*time.Second))
		}
		mark := newMark(t)
		if r := newHold(t, "", mark, "--track=bpf", "--", "true").Run(20 * time.Second); r.Code != 0 {
			t.Fatalf("eBPF hold exited %d:\n%s", r.Code, r.Stderr)
		}
		time.Sleep(slowed(500 * time.Millisecond))
	}
}
