// record.go owns the hold's side of the lineage record: where it goes (and
// the records dir made for the queue's group), and feeding it the hold's
// times, the tracker's events and the teardown's fates. The format and its
// writer belong to tracker (docs/RECORD.md).
package hold

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/record"
)

// recordPath is --dump, else <dir>/<resource>/records/<hold id>.jsonl.
func recordPath(o *Options, id string) string {
	if o.Dump != "" {
		return o.Dump
	}
	return record.RecordPath(filepath.Join(o.Dir, o.Resource), id)
}

// recorder streams one hold's record. A record that cannot be written is
// logged once and the hold goes on: the record serves the hold, not the
// other way round. It exists before the record does (the tracker, loaded
// while the ticket waits, is given its event method), and writes nothing
// until open.
type recorder struct {
	p atomic.Pointer[record.RecordWriter]
}

// open creates the record when the token is granted.
func (r *recorder) open(h *holdRun, granted time.Time) {
	o := &h.o
	path := h.res.Record
	host, _ := os.Hostname()
	w, err := createRecord(o, path, record.HoldInfo{
		ID: h.id, Resource: o.Resource, Label: o.Label, Ticket: h.ticket.Seq, Holder: h.ticket.Holder,
		UID: os.Getuid(), Host: host, Cmd: o.Cmd, Backend: h.res.Backend, Seal: h.res.Seal, BackendNote: h.backendNote,
		Times: record.HoldTimes{Queued: h.queued, Granted: granted},
	})
	if err != nil {
		o.Log.Warn().Err(err).Str("record", path).Msg("cannot write the hold's record; holding without one (check --dir permissions or give --dump)")
		return
	}
	r.p.Store(w)
}

// createRecord creates the record at path: --dump where the caller said,
// else in the resource's records dir, which is never followed when it is a
// symlink and is made for the queue dir's group (a second user's hold must
// be able to write its own record there).
func createRecord(o *Options, path string, h record.HoldInfo) (*record.RecordWriter, error) {
	if o.Dump != "" {
		return record.CreateRecord(path, h)
	}
	d, err := record.OpenRecordsDir(filepath.Join(o.Dir, o.Resource), queueGroup(o.Dir))
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return record.CreateRecordAt(d, filepath.Base(path), h)
}

// queueGroup is the queue dir's group, or -1 when it cannot be read.
func queueGroup(dir string) int {
	var st unix.Stat_t
	if unix.Stat(dir, &st) != nil {
		return -1
	}
	return int(st.Gid)
}

// prune applies the retention to the resource's records directory (after
// the release: no one waits for it). The records dir is never followed
// when it is a symlink; whose records go is retention.go's.
func (r *recorder) prune(o *Options, path string) {
	if o.Dump != "" || path == "" {
		return
	}
	pruneRecords(o, filepath.Dir(path))
}

func (r *recorder) update(fn func(*record.HoldInfo)) {
	if w := r.p.Load(); w != nil {
		w.Update(fn)
	}
}

func (r *recorder) event(ev record.Event) {
	if w := r.p.Load(); w != nil {
		w.Event(ev)
	}
}

func (r *recorder) flush() {
	if w := r.p.Load(); w != nil {
		w.Flush()
	}
}

func (r *recorder) fate(id proc.Ident, f record.Fate, at time.Time) {
	if w := r.p.Load(); w != nil {
		w.Fate(id, f, at)
	}
}

func (r *recorder) started(root proc.Ident, cgroup string, at time.Time) {
	r.update(func(h *record.HoldInfo) {
		h.Payload = &root
		h.PGID = root.PID
		if sid, err := unix.Getsid(root.PID); err == nil {
			h.SID = &sid
		}
		h.Cgroup = cgroup
		h.Times.PayloadStart = at
	})
}

func (r *recorder) close(res *Result, released time.Time, log zerolog.Logger) {
	w := r.p.Load()
	if w == nil {
		return
	}
	code := res.Code
	usage := record.SelfUsage()
	w.Update(func(h *record.HoldInfo) {
		h.Usage = usage
		h.ExitCode = &code
		h.Cause = res.Cause
		h.Signal = int(res.Signal)
		h.Times.Released = released
	})
	if err := w.Close(); err != nil {
		log.Warn().Err(err).Msg("the record is incomplete: check the disk and the records directory's permissions")
	}
}

// reaped notes, in this hold's own record, a dead holder's lineage it ended.
func (r *recorder) reaped(rh record.ReapedHold) {
	r.update(func(h *record.HoldInfo) { h.Reaped = append(h.Reaped, rh) })
}
