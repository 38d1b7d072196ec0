// lineage.go owns what the guard spares as the token holder's: the holder
// is the ticket the queue proves holds the token (a live ticket whose
// process holds the token's lock), and its lineage is what the kernel
// says: the processes that descend from the holder's gpu-hold process,
// those in the hold's cgroup (<holder's cgroup>/gpu-hold-<hold id>, which
// only root creates and fills), and the members of its pinned lineage map
// (eBPF tracker: a member that double-forked away from the holder, by pid
// and start time). Nothing a process says of itself (GPU_HOLD_ID in its
// environment) counts.
package guard

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/gpu-hold/gpu-hold/bpf"
	"github.com/gpu-hold/gpu-hold/internal/cgroup"
	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/queue"
)

// lineage is a resource's current token holder, as far as it is verified.
type lineage struct {
	queue  string             // the queue whose token it holds
	holder proc.Ident         // zero: nobody holds the token
	holdID string             // the holder's hold id (its pin and cgroup are named by it)
	cgroup string             // the hold's cgroup, relative to the cgroup2 mount ("": none)
	pinned *bpf.PinnedLineage // the hold's pinned lineage map (nil: none)
}

// lineageSet is the lineages of a resource's holders: one for a single
// token, one per held device for a pool (a node shared by the pool's
// devices is any of its holders').
type lineageSet []*lineage

func (s lineageSet) has(id proc.Ident) bool { return s.hasFor(id, "") }

// hasFor is has for the holder of queue owner alone ("": any of them).
func (s lineageSet) hasFor(id proc.Ident, owner string) bool {
	for _, l := range s {
		if (owner == "" || l.queue == owner) && l.has(id) {
			return true
		}
	}
	return false
}

func (s lineageSet) close() {
	for _, l := range s {
		l.close()
	}
}

// close releases the pinned map (nil-safe).
func (l *lineage) close() {
	if l != nil {
		l.pinned.Close()
	}
}

// maxDepth bounds the walk from a process up to init.
const maxDepth = 4096

// lineageOf reads resource's token holder now. A queue that cannot be
// read has no holder: its devices' holders are all intruders, which is
// the safe way round for naming, and the end re-checks (enforce.go).
func (g *Guard) lineageOf(resource string) *lineage {
	q, err := g.queue(resource)
	if err != nil {
		if !errors.Is(err, queue.ErrNoResource) {
			g.o.Log.Warn().Err(err).Str("resource", resource).Msg("cannot read the resource's queue: counting no process as its holder's")
		}
		return &lineage{}
	}
	st, err := q.Status()
	if err != nil || st.Holder == nil {
		if err != nil {
			g.o.Log.Warn().Err(err).Str("resource", resource).Msg("cannot read the resource's queue: counting no process as its holder's")
		}
		return &lineage{}
	}
	if g.o.Host != "" && st.Holder.Host != g.o.Host || !proc.Alive(st.Holder.Holder) {
		return &lineage{} // held on another host (its pid means nothing here), or gone
	}
	l := &lineage{holder: st.Holder.Holder, holdID: st.Holder.HoldID, cgroup: holdCgroup(st.Holder.Holder, st.Holder.HoldID)}
	if validHoldID(l.holdID) {
		if _, err := os.Stat(bpf.PinDir(l.holdID)); err == nil {
			l.pinned, _ = bpf.OpenPinnedLineage(l.holdID) // nil when it cannot be read
		}
	}
	return l
}

// queue opens (once) resource's queue, read-only.
func (g *Guard) queue(resource string) (queue.Queue, error) {
	if q, ok := g.queues[resource]; ok {
		return q, nil
	}
	open := g.o.OpenQueue
	if open == nil {
		open = func(resource string) (queue.Queue, error) {
			return queue.OpenDir(g.o.Dir, resource, queue.DirOptions{NoCreate: true, Warn: func(msg string) { g.o.Log.Warn().Msg(msg) }})
		}
	}
	q, err := open(resource)
	if err != nil {
		return nil, err
	}
	g.queues[resource] = q
	return q, nil
}

// has reports whether id is the holder or in its lineage.
func (l *lineage) has(id proc.Ident) bool {
	if l.holder.PID == 0 {
		return false
	}
	return id == l.holder || l.descends(id) || l.inCgroup(id) || l.pinned.Has(id)
}

// descends reports whether id's chain of parents reaches the holder. The
// holder is alive, so its pid names it; each step is read from the kernel
// and id's own start time is checked first.
func (l *lineage) descends(id proc.Ident) bool {
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
		if st.Ident == l.holder {
			return true
		}
	}
	return false
}

// inCgroup reports whether id is in the hold's cgroup (or below it).
func (l *lineage) inCgroup(id proc.Ident) bool {
	if l.cgroup == "" {
		return false
	}
	cg, ok := cgroupOf(id)
	return ok && (cg == l.cgroup || strings.HasPrefix(cg, l.cgroup+"/"))
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
