// owed.go owns what a teardown waits for beyond the union it walks: every
// process it signalled, until that process has exited. A process with a
// signal pending still holds its files and its device memory until its
// exit is done; one that left the union after its TERM (it moved to
// another group) is still the teardown's to end; and the group's KILL
// reaches members no walk saw.
package teardown

import (
	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/tracker"
)

// withOwed adds to live every process r signalled one by one that is
// still alive, outside live: the KILL passes then end it and wait for it,
// and past the survivor bound it is a survivor. What is seen dead is owed
// no more, so each is read until it is gone, not once per wait.
func (td *Teardown) withOwed(r *run, live map[proc.Ident]proc.Stat) map[proc.Ident]proc.Stat {
	for id := range r.owed {
		if _, ok := live[id]; ok {
			continue
		}
		if _, ok := td.denied[id]; ok {
			delete(r.owed, id) // reported as denied, never chased
			continue
		}
		st, err := proc.ReadStat(id.PID)
		if err != nil || st.Start != id.Start || st.Dead() {
			delete(r.owed, id)
			continue
		}
		if live == nil {
			live = map[proc.Ident]proc.Stat{}
		}
		live[id] = st
	}
	return live
}

// groupAlive is the payload's group's members alive now, read after the
// group's KILL: what the KILL reached and has not finished exiting, or
// what joined the group since. Nothing once the group's number is no
// longer the payload's (groupIsOurs).
func (td *Teardown) groupAlive() map[proc.Ident]proc.Stat {
	out := map[proc.Ident]proc.Stat{}
	if td.PGID <= 0 || td.PGID == td.selfPGID {
		return out
	}
	snap := &proc.Snapshot{ByPID: map[int]proc.Stat{}, Children: map[int][]int{}}
	if pids, err := tracker.GroupMembers(td.PGID); err == nil {
		snap.Read(append(pids, td.PGID))
	} else if snap, err = td.walk(); err != nil {
		td.Log.Warn().Err(err).Int("pgid", td.PGID).Msg("cannot walk /proc for the payload's group after its KILL; its members are not waited for")
		return out
	}
	if !td.groupIsOurs(snap) {
		return out
	}
	for _, st := range snap.ByPID {
		_, denied := td.denied[st.Ident]
		if st.PGID == td.PGID && st.PID != td.selfPID && !st.Dead() && !denied {
			out[st.Ident] = st
		}
	}
	return out
}
