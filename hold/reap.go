// reap.go owns ending a dead holder's lineage: the queue hands the next
// ticket (or `gpu-hold reap`) every holder that died without releasing, and
// its lineage, group and cgroup are ended with the same teardown before the
// token is used. The reaping is appended to the dead holder's record and
// noted in the reaper's own.
package hold

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/gpu-hold/gpu-hold/internal/cgroup"
	"github.com/gpu-hold/gpu-hold/internal/fleetenv"
	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/record"
	"github.com/gpu-hold/gpu-hold/internal/teardown"
	"github.com/gpu-hold/gpu-hold/queue"
	"github.com/gpu-hold/gpu-hold/tracker"
)

// holderAlive reports whether a holder the queue found dead (its lock is
// gone) is alive all the same. A holder whose lock went with its last
// thread's files may still be finishing its exit: its main thread shows as
// a zombie while the other threads end, or it is still closing its files
// (the token's before its ticket's). It is given up to dyingWait to
// finish (its pidfd turns readable when the last thread is gone) before its
// ticket is taken for a lie.
func holderAlive(id proc.Ident) bool {
	st, ok := proc.LiveStat(id)
	if !ok || st.State != 'Z' && !st.Exiting() {
		return ok
	}
	h, err := proc.Open(id)
	if err != nil {
		return false // it finished meanwhile
	}
	defer h.Close()
	return !h.WaitExit(dyingWait)
}

// dyingWait bounds the wait for a dying holder's last threads (holderAlive).
const dyingWait = 2 * time.Second

// reapOne ends dead holder d's lineage with d's own authority and returns
// what was done. Blocked is set when what is verifiably d's lineage could
// not be ended with it: d must then not be marked reaped.
func reapOne(d queue.Ticket, via, reaperHold string, grace, survivorWait time.Duration, log zerolog.Logger) record.ReapedHold {
	log = log.With().Uint64("dead_ticket", d.Seq).Str("dead_hold", d.HoldID).Int("dead_pid", d.Holder.PID).Int("dead_uid", d.UID).Logger()
	log.Warn().Uint64("ticket", d.Seq).Str("label", d.Label).Msg("dead holder: the previous holder died without releasing; ending its lineage first")
	rh := record.ReapedHold{HoldID: d.HoldID, Holder: d.Holder, Record: d.Record, At: time.Now()}

	switch {
	case !holderAlive(d.Holder):
	case d.Unheld:
		// Its own user's process keeps the ticket locked and holds no lock
		// of the queue: its payload's doing, or its user's own forgery.
		// Either way its lineage is ended with that user's authority.
		log.Warn().Msg("the dead holder's ticket names a live process that holds no lock of the queue (its payload made it so, or its user forged it): ending its lineage all the same")
	default:
		// The queue found this holder dead (its lock is gone), yet the
		// identity the ticket names is alive: the ticket lies. End nothing.
		log.Error().Msg("the dead holder's ticket names a live process as its holder (forged or damaged ticket): not ending anything for it")
		rh.Error = "ticket names a live holder"
		return rh
	}
	as, err := proc.As(d.UID)
	if err != nil {
		return foreignLineage(d, rh, err, log)
	}
	defer as.Close()
	c := believe(d, log)
	if c.record != "" {
		rh.Record = c.record
	}
	out, info := endClaimed(d, &c, as, via, reaperHold, grace, survivorWait, log)
	rh.Ended = out.Ended
	notOurs := map[proc.Ident]bool{}
	for _, st := range out.Denied {
		if c.evidence(st) {
			rh.Denied = append(rh.Denied, st.Ident)
		} else {
			notOurs[st.Ident] = true
			log.Warn().Int("pid", st.PID).Str("comm", st.Comm).Msg("not ended: the dead holder's record or group names a process its user may not signal and nothing shows is its lineage")
		}
	}
	for _, id := range info.Survivors {
		if !notOurs[id] {
			rh.Survivors = append(rh.Survivors, id)
		}
	}
	if len(rh.Denied) > 0 {
		rh.Blocked = fmt.Sprintf("%d of its lineage now run as another user, which uid %d may not signal", len(rh.Denied), d.UID)
	}
	log.Warn().Str("source", info.Source).Int("ended", rh.Ended).Int("survivors", len(rh.Survivors)).Int("denied", len(rh.Denied)).Uint64("ticket", d.Seq).
		Msg("dead holder's lineage ended")
	return rh
}

// foreignLineage is the reap of another user's dead holder by a process
// that is not root and so cannot act as that user: done only when that
// user has nothing left running at all and nothing its record names is
// alive (a member that became another user, E20); otherwise blocked, for
// root.
func foreignLineage(d queue.Ticket, rh record.ReapedHold, err error, log zerolog.Logger) record.ReapedHold {
	if !proc.UserRuns(d.UID) {
		alive := believe(d, log).alive(d.Published)
		if len(alive) == 0 {
			return rh // nothing of uid's runs, nor anything its record names
		}
		log.Warn().Int("alive", len(alive)).Int("pid", alive[0].PID).Int("uid_now", proc.UID(alive[0].PID)).
			Msg("the dead holder's user runs nothing, but its record names a member still alive as another user (it ran a setuid program)")
	}
	rh.Blocked = err.Error()
	return rh
}

// endClaimed runs the teardown over what c claims, with authority as, and
// appends the reaping to the dead holder's record when that is its own.
func endClaimed(d queue.Ticket, c *claim, as *proc.Authority, via, reaperHold string, grace, survivorWait time.Duration, log zerolog.Logger) (teardown.Outcome, record.ReapInfo) {
	self, _ := proc.Self()
	host, _ := os.Hostname()
	info := record.ReapInfo{By: self, Via: via, HoldID: reaperHold, UID: os.Getuid(), Host: host, Started: time.Now()}
	var w *record.RecordWriter
	var sink record.Sink
	if c.record != "" {
		var err error
		if w, err = record.AppendRecord(c.record); err != nil {
			log.Warn().Err(err).Msg("cannot append the reaping to the dead holder's record")
			w = nil
		} else {
			sink = w.Event
		}
	}
	tr, source := tracker.Resume(c.Claim, sink)
	defer tr.Close() // on every return; closing twice does nothing
	info.Source = source
	if w != nil {
		w.Reap(info)
	}
	td := &teardown.Teardown{Tracker: tr, PGID: c.pgid, Root: c.root, Cgroup: cgroup.Open(c.cgroup), Grace: grace, SurvivorWait: survivorWait, Log: log, As: as}
	if w != nil {
		td.Fate = w.Fate
	}
	out := td.Run()
	if td.Cgroup != nil {
		td.Cgroup.Remove(time.Second)
	}
	// Unpin and close the lineage before the record: the exits still in a
	// pinned lineage's ring buffer go to the dead holder's record.
	if err := tr.Unpin(); err != nil && !errors.Is(err, tracker.ErrNotSupported) {
		log.Warn().Err(err).Msg("cannot remove the dead holder's pins")
	}
	tr.Close()
	info.Ended, info.Candidates, info.Signalled = time.Now(), len(c.IDs), out.Ended
	for _, st := range out.Survivors {
		info.Survivors = append(info.Survivors, st.Ident)
	}
	if w != nil {
		w.Reap(info)
		w.Close()
	}
	return out, info
}

// ReapOptions configure `gpu-hold reap`.
type ReapOptions struct {
	Dir, Resource       string
	All                 bool // every resource of Dir
	Grace, SurvivorWait time.Duration
	Log                 zerolog.Logger
	Etcd                *Fleet // the fleet queue (nil: the directory)
}

// Reap ends the lineage of a resource's dead holders (of every resource's,
// with All) without running a payload. It takes the token when it is free
// and releases it after; while a live successor holds the token (waiting,
// unable to end a dead holder itself), it reaps beside it. It returns how
// many dead holders it reaped; an error names those it could not end.
func Reap(ctx context.Context, o ReapOptions) (int, error) {
	resources := append([]string{o.Resource}, poolQueues(o.Dir, o.Resource, func(m string) { o.Log.Warn().Msg(m) })...)
	if o.All {
		makeDeclaredDirs(o.Dir, o.Log)
		var err error
		if resources, err = fleetenv.ResourceDirs(o.Dir); err != nil {
			return 0, err
		}
	} else if err := fleetenv.KnownResource(o.Dir, o.Resource); err != nil && o.Etcd == nil {
		return 0, err // a typo: nothing to reap, and no dir is made for it
	}
	n := 0
	var errs []error
	for _, res := range resources {
		k, err := reapResource(ctx, o, res)
		n += k
		if err != nil {
			errs = append(errs, err)
		}
	}
	return n, errors.Join(errs...)
}

// reapResource is Reap for one resource.
func reapResource(ctx context.Context, o ReapOptions, res string) (int, error) {
	if _, err := os.Lstat(filepath.Join(o.Dir, res)); o.Etcd == nil && errors.Is(err, os.ErrNotExist) {
		return 0, nil // nobody has queued for it: no dead holder, and nothing to make
	}
	q, err := openReapQueue(o, res)
	if err != nil {
		return 0, err
	}
	if st, err := q.Status(); o.All && err == nil && len(st.Dead) == 0 {
		return 0, nil // a sweep does not take a token that nobody needs reaped
	}
	self, err := proc.Self()
	if err != nil {
		return 0, fmt.Errorf("cannot read own identity from /proc: %v", err)
	}
	host := fleetenv.TicketHost()
	g, err := q.TakeDead(ctx, queue.Ticket{Resource: res, Label: "gpu-hold reap", Holder: self, UID: os.Getuid(), Host: host, Created: time.Now()})
	if errors.Is(err, queue.ErrNotDead) {
		// A live holder: a successor may be waiting on dead holders it
		// may not end itself.
		// Otherwise nothing happens, as reap's help says: not a failure.
		if g, err = q.ReapDead(); err == nil && len(g.Dead()) == 0 {
			return 0, nil
		}
	}
	if err != nil {
		return 0, err
	}
	defer g.Release()
	n := 0
	var blocked []string
	for _, d := range g.Dead() {
		if o.Etcd != nil && !confirmDead(d, o.Log) {
			g.Reaped(d)
			continue
		}
		rh := reapOne(d, "reap", "", o.Grace, o.SurvivorWait, o.Log)
		if rh.Blocked != "" {
			blocked = append(blocked, fmt.Sprintf("%s: %s", d.Describe(), rh.Blocked))
			continue
		}
		if err := g.Reaped(d); err != nil {
			return n, fmt.Errorf("ended dead holder %s but cannot clear it from the queue: %v", d.Describe(), err)
		}
		n++
	}
	if len(blocked) > 0 {
		next := "run gpu-hold reap as root"
		if os.Geteuid() == 0 {
			// Root acts with the dead holder's authority: what it could
			// not end became another user (a setuid program).
			next = "end what its record names by hand (gpu-hold show it), then run gpu-hold reap again"
		}
		return n, fmt.Errorf("%s: could not end the lineage of %s; %s", res, strings.Join(blocked, "; "), next)
	}
	return n, nil
}
