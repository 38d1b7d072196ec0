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

	"github.com/gpu-hold/gpu-hold/proc"
	"github.com/gpu-hold/gpu-hold/queue"
	"github.com/gpu-hold/gpu-hold/tracker"
)

// reapDead ends the lineage of every dead holder the grant names, then
// tells the queue each was reaped. A lineage that cannot be fully ended is
// reported with its survivors; the token is still used (the alternative,
// a queue stuck for ever, is worse).
func (h *holdRun) reapDead(ctx context.Context, g queue.Grant) error {
	for _, d := range g.Dead() {
		rh := reapOne(d, "hold", h.id, h.o.Grace, h.o.SurvivorWait, h.o.Log)
		h.rec.reaped(rh)
		if err := g.Reaped(d); err != nil {
			return failf(ExitUsage, "ended dead holder %s but cannot clear it from the queue: %v", d.Describe(), err)
		}
	}
	return nil
}

// holderAlive reports whether a holder the queue found dead (its lock is
// gone) is alive all the same. A holder whose lock went with its last
// thread's files may still be finishing its exit: its main thread shows as
// a zombie while the other threads end. It is given up to dyingWait to
// finish (its pidfd turns readable when the last thread is gone) before its
// ticket is taken for a lie.
func holderAlive(id proc.Ident) bool {
	st, ok := proc.LiveStat(id)
	if !ok || st.State != 'Z' {
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

// reapOne ends dead holder d's lineage and returns what was done.
func reapOne(d queue.Ticket, via, reaperHold string, grace, survivorWait time.Duration, log zerolog.Logger) tracker.ReapedHold {
	log = log.With().Uint64("dead_ticket", d.Seq).Str("dead_hold", d.HoldID).Int("dead_pid", d.Holder.PID).Logger()
	log.Warn().Uint64("ticket", d.Seq).Str("label", d.Label).Msg("dead holder: the previous holder died without releasing; ending its lineage first")
	rh := tracker.ReapedHold{HoldID: d.HoldID, Holder: d.Holder, Record: d.Record, At: time.Now()}

	if holderAlive(d.Holder) {
		// The queue found this holder dead (its lock is gone), yet the
		// identity the ticket names is alive: the ticket lies. End nothing.
		log.Error().Msg("the dead holder's ticket names a live process as its holder (forged or damaged ticket): not ending anything for it")
		rh.Error = "ticket names a live holder"
		return rh
	}
	var ids []proc.Ident
	var pgid int
	var root proc.Ident
	var cgPath string
	rec, err := tracker.ReadRecord(d.Record)
	switch {
	case err != nil:
		log.Warn().Err(err).Msg("cannot read the dead holder's record; ending its pinned lineage and marked processes only")
	case rec.Hold.ID != d.HoldID || rec.Hold.Holder != d.Holder:
		log.Error().Str("record", d.Record).Msg("the dead holder's record is not its own (hold id or holder differ): ignoring it")
	default:
		ids, cgPath = rec.Live, rec.Hold.Cgroup
		if rec.Hold.Payload != nil {
			// The group is ended only while its leader still holds the
			// number (see teardown.groupIsOurs).
			pgid, root = rec.Hold.PGID, *rec.Hold.Payload
		}
		if cgPath != "" && !ownCgroupPath(cgPath, d.HoldID) {
			log.Error().Str("cgroup", cgPath).Msg("the dead holder's record names a cgroup gpu-hold did not make for it: ignoring it")
			cgPath = ""
		}
	}
	self, _ := proc.Self()
	host, _ := os.Hostname()
	info := tracker.ReapInfo{By: self, Via: via, HoldID: reaperHold, UID: os.Getuid(), Host: host, Started: time.Now()}
	var w *tracker.RecordWriter
	var sink tracker.Sink
	if d.Record != "" {
		if w, err = tracker.AppendRecord(d.Record); err != nil {
			log.Warn().Err(err).Msg("cannot append the reaping to the dead holder's record")
			w = nil
		} else {
			sink = w.Event
		}
	}
	tr, source := tracker.Resume(d.HoldID, ids, d.UID, sink)
	defer tr.Close() // on every return; closing twice does nothing
	info.Source = source
	if w != nil {
		w.Reap(info)
	}
	td := &teardown{tr: tr, pgid: pgid, root: root, cg: openCgroup(cgPath), grace: grace, survivorWait: survivorWait, log: log}
	if d.UID != 0 && source != tracker.SourceBPFPin {
		// What a user's record names is only believed of that user's processes.
		td.onlyUID, td.uid = true, d.UID
	}
	if w != nil {
		td.fate = w.Fate
	}
	out := td.run()
	if td.cg != nil {
		td.cg.Remove(time.Second)
	}
	// Unpin and close the lineage before the record: the exits still in a
	// pinned lineage's ring buffer go to the dead holder's record.
	if p, ok := tr.(tracker.Pinner); ok {
		if err := p.Unpin(); err != nil {
			log.Warn().Err(err).Msg("cannot remove the dead holder's pins")
		}
	}
	tr.Close()
	info.Ended, info.Candidates, info.Signalled = time.Now(), len(ids), out.Ended
	for _, st := range out.Survivors {
		info.Survivors = append(info.Survivors, st.Ident)
	}
	if w != nil {
		w.Reap(info)
		w.Close()
	}
	rh.Ended, rh.Survivors = out.Ended, info.Survivors
	log.Warn().Str("source", source).Int("ended", rh.Ended).Int("survivors", len(rh.Survivors)).Uint64("ticket", d.Seq).
		Msg("dead holder's lineage ended")
	return rh
}

// ownCgroupPath reports whether path is the cgroup gpu-hold makes for hold
// id: gpu-hold-<id> inside the cgroup v2 mount.
func ownCgroupPath(path, id string) bool {
	mnt := CgroupMount()
	clean := filepath.Clean(path)
	return mnt != "" && id != "" && filepath.Base(clean) == "gpu-hold-"+id &&
		strings.HasPrefix(clean, filepath.Clean(mnt)+"/")
}

// ReapOptions configure `gpu-hold reap`.
type ReapOptions struct {
	Dir, Resource       string
	Grace, SurvivorWait time.Duration
	Log                 zerolog.Logger
}

// Reap ends the lineage of a resource's dead holder, if any, without
// running a payload, and releases the token. It returns how many dead
// holders it reaped; queue.ErrNotDead when the holder is alive.
func Reap(ctx context.Context, o ReapOptions) (int, error) {
	q, err := queue.OpenDir(o.Dir, o.Resource, queue.DirOptions{Warn: func(msg string) { o.Log.Warn().Msg(msg) }})
	if err != nil {
		return 0, err
	}
	self, err := proc.Self()
	if err != nil {
		return 0, fmt.Errorf("cannot read own identity from /proc: %v", err)
	}
	host, _ := os.Hostname()
	g, err := q.TakeDead(ctx, queue.Ticket{Resource: o.Resource, Label: "gpu-hold reap", Holder: self, UID: os.Getuid(), Host: host, Created: time.Now()})
	if err != nil {
		if errors.Is(err, queue.ErrNotDead) {
			return 0, fmt.Errorf("the %s token is held by a live holder: nothing to reap (see gpu-hold queue -r %s)", o.Resource, o.Resource)
		}
		return 0, err
	}
	defer g.Release()
	n := 0
	for _, d := range g.Dead() {
		reapOne(d, "reap", "", o.Grace, o.SurvivorWait, o.Log)
		if err := g.Reaped(d); err != nil {
			return n, fmt.Errorf("ended dead holder %s but cannot clear it from the queue: %v", d.Describe(), err)
		}
		n++
	}
	return n, nil
}
