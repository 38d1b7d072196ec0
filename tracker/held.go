// held.go owns the read-only view of a live hold's lineage that another
// process (the guard) takes: what the kernel says of it, namely the
// processes that descend from the holder's gpu-hold process, those in the
// hold's cgroup (<holder's cgroup>/gpu-hold-<hold id>, which only root
// creates and fills), and the members of its pinned lineage map (eBPF: a
// member that double-forked away from the holder, by pid and start time).
// Nothing a process says of itself (GPU_HOLD_ID in its environment)
// counts, and the view neither reads the hold's events nor seals it.
package tracker

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/gpu-hold/gpu-hold/bpf"
	"github.com/gpu-hold/gpu-hold/internal/cgroup"
	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/record"
)

// OpenHeld opens the view of the lineage of hold holdID, held by holder
// (alive: its pid names it). Its Has and Cgroup answer; it cannot launch,
// seal or pin, and Close frees only the view.
func OpenHeld(holder proc.Ident, holdID string) *Lineage {
	v := &heldView{holder: holder, cg: holdCgroup(holder, holdID)}
	if validHoldID(holdID) {
		if _, err := os.Stat(bpf.PinDir(holdID)); err == nil {
			v.pinned, _ = bpf.OpenPinnedLineage(holdID) // nil when it cannot be read
		}
	}
	return lineageOf(v)
}

// heldView is a live hold's lineage seen from outside it.
type heldView struct {
	noCaps
	holder proc.Ident
	cg     string             // the hold's cgroup, relative to the cgroup2 mount ("": none)
	pinned *bpf.PinnedLineage // the hold's pinned lineage map (nil: none)
}

var errHeldView = errors.New("a view of another process's hold cannot launch or seal its lineage: only its holder can")

func (v *heldView) Backend() string          { return "" }
func (v *heldView) Prepare(*exec.Cmd) error  { return errHeldView }
func (v *heldView) Started(proc.Ident) error { return errHeldView }
func (v *heldView) Seal() error              { return errHeldView }
func (v *heldView) Changed() <-chan struct{} { return nil }
func (v *heldView) Counters() record.Counters {
	return record.Counters{}
}

// Close releases the pinned map (nil-safe).
func (v *heldView) Close() error {
	v.pinned.Close()
	return nil
}

func (v *heldView) cgroup() string { return v.cg }

// Live walks /proc for the members.
func (v *heldView) Live() ([]proc.Stat, error) {
	s, err := proc.TakeSnapshot()
	if err != nil {
		return nil, err
	}
	return v.LiveIn(s), nil
}

// LiveIn is every live process of s that is a member.
func (v *heldView) LiveIn(s *proc.Snapshot) []proc.Stat {
	var live []proc.Stat
	for _, st := range s.ByPID {
		if ok, _ := v.has(st.Ident); ok && !st.Dead() {
			live = append(live, st)
		}
	}
	return live
}

// has reports whether id is the holder or in its lineage.
func (v *heldView) has(id proc.Ident) (bool, error) {
	if v.holder.PID == 0 {
		return false, nil
	}
	return id == v.holder || v.descends(id) || v.inCgroup(id) || v.pinned.Has(id), nil
}

// maxDepth bounds the walk from a process up to init.
const maxDepth = 4096

// descends reports whether id's chain of parents reaches the holder. The
// holder is alive, so its pid names it; each step is read from the kernel
// and id's own start time is checked first.
func (v *heldView) descends(id proc.Ident) bool {
	st, err := proc.ReadStat(id.PID)
	if err != nil || st.Start != id.Start {
		return false
	}
	for range maxDepth {
		if st.PPID <= 1 {
			return false
		}
		if st, err = proc.ReadStat(st.PPID); err != nil {
			return false
		}
		if st.Ident == v.holder {
			return true
		}
	}
	return false
}

// inCgroup reports whether id is in the hold's cgroup (or below it).
func (v *heldView) inCgroup(id proc.Ident) bool {
	if v.cg == "" {
		return false
	}
	cg, ok := cgroupOf(id)
	return ok && (cg == v.cg || strings.HasPrefix(cg, v.cg+"/"))
}

// cgroupOf reads id's cgroup v2 path, checking afterwards that the pid
// still is id.
func cgroupOf(id proc.Ident) (string, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(id.PID) + "/cgroup")
	if err != nil || !proc.Alive(id) {
		return "", false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p, true
		}
	}
	return "", false
}

// holdCgroup is the cgroup a hold of holdID by holder made, when it
// exists and is root's; "" otherwise.
func holdCgroup(holder proc.Ident, holdID string) string {
	if !validHoldID(holdID) {
		return ""
	}
	own, ok := cgroupOf(holder)
	mnt := cgroup.Mount()
	if !ok || mnt == "" {
		return ""
	}
	rel := filepath.Join(own, "gpu-hold-"+holdID)
	fi, err := os.Lstat(filepath.Join(mnt, rel))
	if err != nil || !fi.IsDir() {
		return ""
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || st.Uid != 0 {
		return ""
	}
	return rel
}

// validHoldID accepts what hold ids are made of (no '/', no "..").
func validHoldID(id string) bool {
	if id == "" || len(id) > 128 || strings.Contains(id, "..") {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}
