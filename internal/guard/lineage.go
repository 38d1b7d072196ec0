// lineage.go owns what the guard spares as the token holder's: the holder
// is the ticket the queue proves holds the token (a live ticket whose
// process holds the token's lock), and its lineage is what the kernel
// says, as the tracker's view of a held lineage reads it (tracker.OpenHeld:
// the holder's descendants, the hold's cgroup, its pinned lineage map).
// Nothing a process says of itself (GPU_HOLD_ID in its environment) counts.
package guard

import (
	"errors"

	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/queue"
	"github.com/gpu-hold/gpu-hold/tracker"
)

// lineage is a resource's current token holder, as far as it is verified.
type lineage struct {
	queue  string           // the queue whose token it holds
	holder proc.Ident       // zero: nobody holds the token
	holdID string           // the holder's hold id (its pin and cgroup are named by it)
	held   *tracker.Lineage // the holder's lineage (nil: nobody holds the token)
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

// close releases the view of the lineage (nil-safe).
func (l *lineage) close() {
	if l != nil && l.held != nil {
		l.held.Close()
	}
}

// cgroup is the hold's cgroup, relative to the cgroup2 mount ("": none).
func (l *lineage) cgroup() string {
	if l.held == nil {
		return ""
	}
	return l.held.Cgroup()
}

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
	return &lineage{holder: st.Holder.Holder, holdID: st.Holder.HoldID, held: tracker.OpenHeld(st.Holder.Holder, st.Holder.HoldID)}
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
	if l.holder.PID == 0 || l.held == nil {
		return false
	}
	ok, err := l.held.Has(id)
	return err == nil && ok
}
