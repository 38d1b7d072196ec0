// record_read.go owns reading a lineage record: it splits the JSON lines,
// tolerates a final line cut short by a killed hold, and reports any other
// damage as an error that names the line. Assembling the lines into
// processes is record_assemble.go's.
package record

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/safefs"
)

// Record is a record read back and assembled: the document `gpu-hold show
// --format json` prints.
type Record struct {
	Path    string   `json:"path,omitempty"`
	Version int      `json:"version"`
	Hold    HoldInfo `json:"hold"`
	// Processes are every lineage member, sorted by start time then pid.
	Processes []Process `json:"processes"`
	// Live are the members with no exit seen: what may still run when the
	// record's writer is gone. A reaper checks each one's start time before
	// it signals it.
	Live  []proc.Ident `json:"live"`
	Reaps []ReapInfo   `json:"reaps,omitempty"`
	// Ended says the holder wrote its end line; a record without one comes
	// from a holder that died (or still runs).
	Ended   bool      `json:"ended"`
	EndedAt time.Time `json:"ended_at,omitzero"`
	// Running says the holder is alive (checked by its identity, by
	// whoever shows the record): the record is the lineage so far, and a
	// member with no exit seen is running, not of unknown fate.
	Running bool `json:"running,omitempty"`
	// Truncated says the last line was cut short (a killed writer) and was
	// left out.
	Truncated bool `json:"truncated,omitempty"`
	Lines     int  `json:"lines"`
	// Last is the latest instant any line but an end line names.
	Last time.Time `json:"last,omitzero"`
	// File is what the open that read the record said of the file (its
	// owner, mode and links): whose evidence it is. ReadRecord sets it.
	File safefs.Info `json:"-"`
	// Writer is whose file it is, beside the holder it names (SetWriter).
	Writer *Writer `json:"writer,omitempty"`

	byID map[proc.Ident]int
}

// lineage indexes the processes by parent: each member's children (as
// indexes into Processes, in order), and the roots, those whose parent is
// not in the record.
func (r *Record) lineage() (children map[proc.Ident][]int, roots []int) {
	children = make(map[proc.Ident][]int, len(r.Processes))
	for i, p := range r.Processes {
		if p.Parent != nil && r.Process(*p.Parent) != nil {
			children[*p.Parent] = append(children[*p.Parent], i)
		} else {
			roots = append(roots, i)
		}
	}
	return children, roots
}

// Process returns the member with identity id, or nil.
func (r *Record) Process(id proc.Ident) *Process {
	if i, ok := r.byID[id]; ok {
		return &r.Processes[i]
	}
	return nil
}

// RecordError is damage in a record, at a line.
type RecordError struct {
	Path string
	Line int
	Err  error
}

func (e *RecordError) Error() string {
	name := e.Path
	if name == "" {
		name = "(input)"
	}
	return fmt.Sprintf("record %s, line %d: %v", name, e.Line, e.Err)
}

func (e *RecordError) Unwrap() error { return e.Err }

// UntrustedError is ReadRecordIf's refusal: the file is not believed.
type UntrustedError struct{ Path, Why string }

func (e *UntrustedError) Error() string {
	return fmt.Sprintf("not believing record %s: %s", e.Path, e.Why)
}

// ReadRecord reads and assembles the record at path. The file is opened
// never through a symlink and without blocking, and only when it is a
// regular file (a FIFO or device planted at a ticket's record path is an
// error that says what it is and whose, a *safefs.NotRegularError);
// Record.File says whose file it was, from the same open. A last line cut
// short is left out (Truncated); damage anywhere else is a *RecordError
// naming the line.
func ReadRecord(path string) (*Record, error) { return ReadRecordIf(path, nil) }

// ReadRecordIf is ReadRecord that reads the file only when trust (nil:
// any) finds nothing against it, from the same open: a reader that would
// not believe a file need not pay for reading it. The error then says why.
func ReadRecordIf(path string, trust func(safefs.Info) string) (*Record, error) {
	d, err := safefs.OpenDir(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("cannot read record %s: %w", path, err)
	}
	defer d.Close()
	f, st, err := d.Open(filepath.Base(path), unix.O_RDONLY)
	if err != nil {
		return nil, fmt.Errorf("cannot read record: %w", err)
	}
	defer f.Close()
	if trust != nil {
		if why := trust(st); why != "" {
			return nil, &UntrustedError{Path: path, Why: why}
		}
	}
	rec, _, err := readRecord(f, path)
	if rec != nil {
		rec.File = st
	}
	return rec, err
}

// tailInfo tells an appender how the file ends.
type tailInfo struct {
	good         int64 // bytes up to the end of the last whole line
	partial      int   // bytes of a cut-short last line, left out
	unterminated bool  // the last line is whole but has no newline
}

func readRecord(r io.Reader, path string) (*Record, tailInfo, error) {
	var tail tailInfo
	b := newBuilder(path)
	br := bufio.NewReaderSize(r, 64<<10)
	var buf []byte
	n := 0
	for {
		line, terminated, err := readLine(br, buf[:0])
		buf = line
		if err != nil && !errors.Is(err, io.EOF) {
			if errors.Is(err, errLineTooLong) {
				return nil, tail, &RecordError{Path: path, Line: n + 1, Err: err}
			}
			return nil, tail, fmt.Errorf("reading record %s after line %d: %w", path, n, err)
		}
		if len(line) == 0 && !terminated {
			break // end of file
		}
		n++
		if n > maxRecordLines {
			return nil, tail, &RecordError{Path: path, Line: n, Err: fmt.Errorf("more than %d lines, which no hold writes: not read further", maxRecordLines)}
		}
		body := line
		if terminated {
			body = line[:len(line)-1]
		}
		if !terminated {
			// The last line, without its newline: whole, or cut short by a
			// writer that was killed mid-write.
			if !json.Valid(body) {
				if n == 1 {
					return nil, tail, &RecordError{Path: path, Line: 1, Err: errors.New("the header line is incomplete: the hold was killed before it wrote its header; there is nothing to show")}
				}
				b.rec.Truncated = true
				tail.partial = len(line)
				n--
				break
			}
			tail.unterminated = true
		}
		if err := b.line(n, body); err != nil {
			return nil, tail, &RecordError{Path: path, Line: n, Err: err}
		}
		if len(b.procs) > maxRecordProcesses {
			return nil, tail, &RecordError{Path: path, Line: n, Err: fmt.Errorf("more than %d processes, which no hold records: not read further", maxRecordProcesses)}
		}
		tail.good += int64(len(line))
		if !terminated {
			break
		}
	}
	if n == 0 {
		return nil, tail, &RecordError{Path: path, Line: 1, Err: errors.New("the record is empty: the hold was killed before it wrote its header; there is nothing to show")}
	}
	b.rec.Lines = n
	b.finish()
	return b.rec, tail, nil
}

var errLineTooLong = fmt.Errorf("the line is longer than %d bytes: the record is corrupted", maxLineLen)

// readLine reads one line into buf, newline included when there is one.
func readLine(br *bufio.Reader, buf []byte) ([]byte, bool, error) {
	for {
		frag, err := br.ReadSlice('\n')
		buf = append(buf, frag...)
		if len(buf) > maxLineLen {
			return buf, false, errLineTooLong
		}
		switch {
		case err == nil:
			return buf, true, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return buf, false, err
		}
	}
}

// line parses and applies line n.
func (b *builder) line(n int, data []byte) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return errors.New("the line is empty: the record is corrupted (a writer never writes empty lines)")
	}
	var head lineHead
	if err := json.Unmarshal(data, &head); err != nil {
		return fmt.Errorf("not a JSON object (%v): the record is corrupted; only a cut-short last line is left out", err)
	}
	if n == 1 {
		if head.Type != lineHold {
			return fmt.Errorf("the first line must be the hold header (type %q), not type %q: this is not a gpu-hold record", lineHold, head.Type)
		}
		if head.V <= 0 {
			return errors.New(`the hold header has no format version "v": this is not a gpu-hold record`)
		}
		b.rec.Version = head.V
	}
	if head.V > RecordVersion {
		return fmt.Errorf("the record is in format v%d, newer than this gpu-hold reads (v%d): show it with a newer gpu-hold", head.V, RecordVersion)
	}
	bad := func(err error) error {
		return fmt.Errorf("bad %s line (%v): the record is corrupted", head.Type, err)
	}
	switch head.Type {
	case lineHold:
		var l holdLine
		if err := json.Unmarshal(data, &l); err != nil {
			return bad(err)
		}
		b.hold(l.Hold)
	case lineEvent:
		var l eventLine
		if err := json.Unmarshal(data, &l); err != nil {
			return bad(err)
		}
		if err := checkEvent(l.Event); err != nil {
			return bad(err)
		}
		b.event(l.Event, l.ArgvTruncated)
	case lineFate:
		var l fateLine
		if err := json.Unmarshal(data, &l); err != nil {
			return bad(err)
		}
		if l.PID <= 0 {
			return bad(fmt.Errorf("pid %d", l.PID))
		}
		if !l.Fate.valid() {
			return bad(fmt.Errorf("unknown fate %q", l.Fate))
		}
		b.fate(l.Ident, l.Fate, l.At)
	case lineReap:
		var l reapLine
		if err := json.Unmarshal(data, &l); err != nil {
			return bad(err)
		}
		b.reap(l.Reap)
	case lineEnd:
		var l endLine
		if err := json.Unmarshal(data, &l); err != nil {
			return bad(err)
		}
		b.end(l.At, l.By)
	default:
		return fmt.Errorf("unknown line type %q: the record is corrupted or from another program", head.Type)
	}
	return nil
}

func checkEvent(ev Event) error {
	switch ev.Kind {
	case Fork, Exec, Exit, Regroup, KilledAtBirth:
	default:
		return fmt.Errorf("unknown event kind %q", ev.Kind)
	}
	if ev.PID <= 0 {
		return fmt.Errorf("pid %d", ev.PID)
	}
	if ev.ExitCode != nil && ev.Signal != nil {
		return errors.New("both an exit code and a signal")
	}
	return nil
}
