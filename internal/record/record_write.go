// record_write.go owns writing a lineage record: the hold streams it as JSON
// lines (whole lines only; events and fates in batches written within
// flushDelay, the header at once, so a hold killed mid-way leaves every
// line but those of its last few milliseconds), and a successor appends a
// reap section to a dead holder's record. The writer holds an exclusive
// flock on the file for its life, so an appender can tell a dead holder's
// record from a live one. Record files are opened relative to a checked
// directory fd (safefs): never through a symlink, never a special file.
package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/safefs"
)

// ErrRecordBusy means another live process holds the record's lock: its
// holder is still writing it.
var ErrRecordBusy = errors.New("record is locked by a live writer")

// Events and fates are coalesced: a 10,000-process tree ending at once
// costs a few dozen writes, not 20,000, on the CPUs the kernel needs to end
// it. They are written at most flushDelay after the first of a batch, or as
// soon as a batch holds flushBytes; the header, a reap section and the end
// line are written at once, after whatever is pending.
const (
	flushDelay = 10 * time.Millisecond
	flushBytes = 64 << 10
)

// RecordWriter streams one record. Its methods are safe to call from
// several goroutines (the tracker's sink and the hold). Write errors are
// sticky: later lines are dropped and counted, and Close returns the error.
type RecordWriter struct {
	mu        sync.Mutex
	f         *os.File
	path      string
	hold      HoldInfo
	appending bool        // a successor's writer (AppendRecord)
	reapBy    *proc.Ident // the appender's identity, once Reap was called
	tornTail  int         // bytes of the dead holder's partial last line cut off
	events    int
	dropped   uint64
	written   uint64 // dropped count in the last hold line written
	err       error
	closed    bool
	pending   []byte      // whole lines not yet written
	pendingEv uint64      // events among them (dropped if their write fails)
	timer     *time.Timer // flushes pending, armed by the first pending line
}

// geteuid is the writer's effective uid (tests pretend to be another user).
var geteuid = os.Geteuid

// AppendRecord opens a dead holder's record to append a reap section. It
// fails with an error wrapping ErrRecordBusy while the holder still writes
// it, and when the record is unreadable (the error names the line). The
// file is opened never through a symlink, without blocking, and only when
// it is a regular file with one link owned by this process's uid (or the
// appender is root): a record is its holder's evidence. A partial last
// line the holder left is cut off first (its length goes into the first
// ReapInfo written). Call Reap before Fate or Event.
func AppendRecord(path string) (*RecordWriter, error) {
	f, err := openForAppend(path)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("record %s: %w (its holder is alive): reap only a holder that is gone", path, ErrRecordBusy)
		}
		return nil, fmt.Errorf("cannot lock record %s: %v", path, err)
	}
	rec, tail, err := readRecord(f, path)
	if err != nil {
		f.Close()
		return nil, err
	}
	w := &RecordWriter{f: f, path: path, hold: rec.Hold, appending: true}
	switch {
	case tail.partial > 0:
		if err := f.Truncate(tail.good); err != nil {
			f.Close()
			return nil, fmt.Errorf("cannot cut the partial last line off record %s: %v", path, err)
		}
		w.tornTail = tail.partial
	case tail.unterminated:
		if _, err := f.Write([]byte{'\n'}); err != nil {
			f.Close()
			return nil, fmt.Errorf("cannot append to record %s: %v", path, err)
		}
	}
	return w, nil
}

// openForAppend opens the record at path for AppendRecord's checks.
func openForAppend(path string) (*os.File, error) {
	// The path is a ticket's: a symlink another user planted on the way is
	// never followed.
	d, err := safefs.OpenUserDir(filepath.Dir(path), 0)
	if err != nil {
		return nil, fmt.Errorf("cannot open record %s to append the reap: %w", path, err)
	}
	defer d.Close()
	f, st, err := d.Open(filepath.Base(path), unix.O_RDWR|unix.O_APPEND)
	if err != nil {
		if errors.Is(err, os.ErrPermission) {
			return nil, fmt.Errorf("record %s (owned by uid %d) is not writable by uid %d: %w; only its holder's user or root appends the reap", path, st.UID, geteuid(), err)
		}
		return nil, fmt.Errorf("cannot append the reap to record %s: %w", path, err)
	}
	if euid := geteuid(); euid != 0 && int(st.UID) != euid {
		f.Close()
		return nil, fmt.Errorf("record %s is owned by uid %d, not by this reaper's uid %d: a record is its holder's evidence, so only its owner or root appends to it; the reap goes on without it", path, st.UID, euid)
	}
	return f, nil
}

// Event appends a lineage event, with argv and filename bounded.
func (w *RecordWriter) Event(ev Event) {
	l := eventLine{Type: lineEvent, Event: ev}
	l.Filename = bound(l.Filename, MaxFilenameLen)
	l.Argv, l.ArgvTruncated = boundArgv(ev.Argv)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	if w.events >= MaxRecordEvents || w.err != nil {
		w.dropped++
		return
	}
	w.events++
	if w.writeLocked(&l, false) {
		w.pendingEv++
	} else {
		w.dropped++
	}
}

// Fate records how the process id ended (or that it survived), at the
// instant at. The last fate written for a process wins.
func (w *RecordWriter) Fate(id proc.Ident, fate Fate, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	if !fate.valid() && w.err == nil {
		w.err = fmt.Errorf("record %s: fate %q is not one the format knows (a bug in gpu-hold)", w.path, fate)
		return
	}
	w.writeLocked(fateLine{Type: lineFate, Ident: id, Fate: fate, At: at}, false)
}

// Update changes the header under the writer's lock and writes it again.
// fn must not call the writer. On an appending writer it does nothing: the
// dead holder's header is not the reaper's to change.
func (w *RecordWriter) Update(fn func(h *HoldInfo)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || w.appending {
		return
	}
	fn(&w.hold)
	w.writeHoldLocked()
}

// Reap writes (or, with the same By again, updates) the reap section of an
// appending writer. The Fate lines written after it are the reaper's.
func (w *RecordWriter) Reap(r ReapInfo) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	if !w.appending {
		if w.err == nil {
			w.err = fmt.Errorf("record %s: Reap on the holder's own writer (a bug in gpu-hold): use AppendRecord", w.path)
		}
		return
	}
	r.TornTail = w.tornTail
	by := r.By
	w.reapBy = &by
	w.writeLocked(reapLine{Type: lineReap, Reap: r}, true)
}

// Close writes the end line (with the dropped-event count first when
// events were dropped) and closes the file (no fsync: the lines are in the
// page cache for every reader; only a host crash could lose them), and returns the first
// write error. Calls after Close are ignored.
func (w *RecordWriter) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return w.err
	}
	if !w.appending && w.dropped != w.written {
		w.writeHoldLocked()
	}
	end := endLine{Type: lineEnd, At: time.Now()}
	if w.appending {
		by := w.reapBy
		if by == nil {
			if self, err := proc.Self(); err == nil {
				by = &self
			} else {
				by = &proc.Ident{PID: os.Getpid()}
			}
		}
		end.By = by
	}
	w.writeLocked(end, true)
	if w.timer != nil {
		w.timer.Stop()
	}
	if err := w.f.Close(); err != nil && w.err == nil {
		w.err = fmt.Errorf("closing record %s: %v", w.path, err)
	}
	w.closed = true
	return w.err
}

func (w *RecordWriter) writeHoldLocked() {
	w.hold.DroppedEvents = w.dropped
	if w.writeLocked(holdLine{lineHead: lineHead{V: RecordVersion, Type: lineHold}, Hold: w.hold}, true) {
		w.written = w.dropped
	}
}

// writeLocked adds v as one line, and writes it with whatever is pending
// now (now) or within flushDelay. It reports success so far: a batch that
// fails to write later counts its events as dropped.
func (w *RecordWriter) writeLocked(v any, now bool) bool {
	if w.err != nil {
		return false
	}
	first := len(w.pending) == 0
	b, err := appendLine(w.pending, v)
	if err != nil {
		w.pending = b[:len(w.pending)] // nothing of the line stays,
		w.flushLocked()                // every whole line before it does
		if w.err == nil {
			w.err = fmt.Errorf("record %s: cannot encode a line: %v", w.path, err)
		}
		return false
	}
	w.pending = append(b, '\n')
	switch {
	case now || len(w.pending) >= flushBytes:
		return w.flushLocked()
	case w.timer == nil:
		w.timer = time.AfterFunc(flushDelay, w.Flush)
	case first: // the first line of a new batch
		w.timer.Reset(flushDelay)
	}
	return true
}

// appendLine appends v's JSON: event lines by hand (record_encode.go),
// every other line, written a few times per hold, by encoding/json.
func appendLine(b []byte, v any) ([]byte, error) {
	if l, ok := v.(*eventLine); ok {
		return appendEventLine(b, l)
	}
	enc, err := json.Marshal(v)
	return append(b, enc...), err
}

// Flush writes the pending lines now (the timer's, or a tracker's at the
// end of a batch), and stops the timer that would have.
func (w *RecordWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer != nil {
		w.timer.Stop()
	}
	if !w.closed {
		w.flushLocked()
	}
}

// flushLocked writes the pending lines in one write(2).
func (w *RecordWriter) flushLocked() bool {
	if len(w.pending) == 0 {
		return w.err == nil
	}
	_, err := w.f.Write(w.pending)
	lost := w.pendingEv
	w.pending, w.pendingEv = w.pending[:0], 0
	if err != nil {
		w.dropped += lost
		w.err = fmt.Errorf("writing record %s: %v; the record stops here", w.path, err)
		return false
	}
	return true
}

func bound(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

func boundArgv(argv []string) ([]string, bool) {
	cut := len(argv) > MaxArgs
	n := min(len(argv), MaxArgs)
	for _, a := range argv[:n] {
		if len(a) > MaxArgLen {
			cut = true
		}
	}
	if !cut {
		return argv, false
	}
	out := make([]string, n)
	for i, a := range argv[:n] {
		out[i] = bound(a, MaxArgLen)
	}
	return out, true
}

var _ io.Closer = (*RecordWriter)(nil)
