// record.go owns the hold's side of the lineage record: where it goes (the
// records dir made for the queue's group, or --dump; a hold that cannot
// have a record only its user and root can write does not run), and
// feeding it the hold's times, the tracker's events and the teardown's
// fates. The format and its writer belong to package record (docs/RECORD.md).
package hold

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/record"
	"github.com/gpu-hold/gpu-hold/internal/safefs"
)

// recordPath is --dump, else <dir>/<resource>/records/<hold id>.jsonl.
func recordPath(o *Options, id string) string {
	if o.Dump != "" {
		return o.Dump
	}
	return record.RecordPath(filepath.Join(o.Dir, o.Resource), id)
}

// recorder streams one hold's record. A hold never runs without a record
// that only its user and root can write: one that cannot be made ends the
// hold before its payload (exit 125, saying why). It exists before the
// record does (the tracker, loaded while the ticket waits, is given its
// event method), and writes nothing until open.
type recorder struct {
	p atomic.Pointer[record.RecordWriter]
}

// checkRecord says, once the hold's ticket is queued (the queue makes the
// resource dir), why its record could not be made at the grant, so that
// the hold refuses now rather than at its turn: --dump's directory is
// another user's or its file is there already, or the records dir is one
// another user controls. A records dir of this user's own in a shared
// resource dir is used, with a warning: other users' holds refuse it.
func checkRecord(o *Options) error {
	if o.Dump != "" {
		return recordErr(record.CheckDump(o.Dump))
	}
	res := filepath.Join(o.Dir, o.Resource)
	d, err := record.OpenRecordsDir(res, queueGroup(o.Dir))
	if err != nil {
		return recordErr(err)
	}
	defer d.Close()
	var rst unix.Stat_t
	st, err := d.Stat()
	if euid := os.Geteuid(); err == nil && euid != 0 && int(st.UID) == euid && unix.Stat(res, &rst) == nil && rst.Mode&0o022 != 0 && int(rst.Uid) != euid {
		o.Log.Warn().Str("records", d.Path()).Msgf("the records dir is yours (uid %d), so other users' holds refuse to write their records there (you could rename them): ask an admin to run chown root %s (admins should make it: see gpu-hold doctor)", euid, d.Path())
	}
	return nil
}

// recordErr is the error that ends a hold whose record cannot be made.
func recordErr(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("this hold cannot have a record that only its user and root can write, so it does not run: %w", err)
}

// open creates the record when the token is granted (see createRecord);
// an error ends the hold before its payload runs.
func (r *recorder) open(h *holdRun, granted time.Time) error {
	o := &h.o
	host, _ := os.Hostname()
	w, path, err := createRecord(o, h.res.Record, record.HoldInfo{
		ID: h.id, Resource: o.Resource, Label: o.Label, Ticket: h.ticket.Seq, Holder: h.ticket.Holder,
		UID: os.Getuid(), Host: host, Cmd: o.Cmd, Backend: h.res.Backend, Seal: h.res.Seal, BackendNote: h.backendNote,
		Times: record.HoldTimes{Queued: h.queued, Granted: granted},
	})
	if err != nil {
		return recordErr(err)
	}
	h.res.Record = path
	r.p.Store(w)
	return nil
}

// createRecord creates the record at path and returns where it went:
// --dump where the caller said, else in the resource's records dir (see
// record.OpenRecordsDir). A file already at the record's name there was
// made by someone who read the hold's ticket first: it is never used, and
// the record goes under a fresh name beside it, made O_EXCL, which a
// successor finds by the hold id.
func createRecord(o *Options, path string, h record.HoldInfo) (*record.RecordWriter, string, error) {
	if o.Dump != "" {
		w, err := record.CreateRecord(path, h)
		return w, path, err
	}
	d, err := record.OpenRecordsDir(filepath.Join(o.Dir, o.Resource), queueGroup(o.Dir))
	if err != nil {
		return nil, "", err
	}
	defer d.Close()
	name := filepath.Base(path)
	w, err := record.CreateRecordAt(d, name, h)
	var ee *safefs.ExistsError
	if !errors.As(err, &ee) {
		return w, d.Join(name), err
	}
	o.Log.Warn().Str("planted", ee.Info.Path).Int("owner_uid", int(ee.Info.UID)).Str("kind", ee.Info.Kind()).
		Msg("another file is at this hold's record path, made by someone who read its ticket: never used; the record goes under a fresh name beside it (remove the planted file)")
	for try := 0; try < 3 && errors.As(err, &ee); try++ {
		name = record.FreshRecordName(h.ID)
		w, err = record.CreateRecordAt(d, name, h)
	}
	return w, d.Join(name), err
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
