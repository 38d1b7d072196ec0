// events.go owns the ring buffer side: the events the programs stream
// (fork, exec, exit, killed at birth), decoding them, and the reader.
package bpf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"
	"unsafe"

	"github.com/cilium/ebpf/ringbuf"
)

// Kind is an event's kind (enum event_kind in lineage.bpf.c).
type Kind uint32

const (
	KindFork          Kind = 1 // a child joined the lineage (or the payload)
	KindExec          Kind = 2 // a member executed a program
	KindExit          Kind = 3 // a member's thread group exited
	KindKilledAtBirth Kind = 4 // a member forked after the seal: both were SIGKILLed
)

func (k Kind) String() string {
	switch k {
	case KindFork:
		return "fork"
	case KindExec:
		return "exec"
	case KindExit:
		return "exit"
	case KindKilledAtBirth:
		return "killed-at-birth"
	}
	return fmt.Sprintf("kind(%d)", uint32(k))
}

// Event flags, beyond the member flags.
const (
	EventNotStored        = 0x100 // the lineage map was full: the child is NOT a member
	EventParentKillFailed = 0x200 // sealed: SIGKILL to the forking member failed
	EventChildKillFailed  = 0x400 // sealed: SIGKILL to the newborn failed
	EventArgvTruncated    = 0x800 // argv was longer than the bytes kept
)

// Event is one event as the programs wrote it.
type Event struct {
	Kind    Kind
	PID     int    // tgid of the process the event is about (the child, for fork)
	PPID    int    // fork: the tgid that forked it
	PGID    int    // process group and session at the event
	SID     int    //
	UID     int    // real uid
	StartNs uint64 // the process's start_boottime (ns): NsToTicks gives /proc's field 22
	TimeNs  uint64 // CLOCK_BOOTTIME (ns) when it happened
	// Status is the raw wait status of an exit: see ExitStatus.
	Status   int32
	Flags    uint32
	Filename string   // exec: the program
	Argv     []string // exec: the arguments, bounded (EventArgvTruncated)
}

// ExitStatus decodes Status: a signal number when the process was killed by
// one (low 7 bits), else the exit code ((status >> 8) & 0xff).
func (e Event) ExitStatus() (code int, signal int) {
	if sig := int(e.Status & 0x7f); sig != 0 {
		return 0, sig
	}
	return int(e.Status>>8) & 0xff, 0
}

var (
	eventSize     = int(unsafe.Sizeof(lineageEvent{}))
	execEventSize = int(unsafe.Sizeof(lineageExecEvent{}))
)

// Field offsets in a record: the generated structs' own layout.
var (
	offKind     = unsafe.Offsetof(lineageEvent{}.Kind)
	offPid      = unsafe.Offsetof(lineageEvent{}.Pid)
	offPpid     = unsafe.Offsetof(lineageEvent{}.Ppid)
	offPgid     = unsafe.Offsetof(lineageEvent{}.Pgid)
	offSid      = unsafe.Offsetof(lineageEvent{}.Sid)
	offUid      = unsafe.Offsetof(lineageEvent{}.Uid)
	offStartNs  = unsafe.Offsetof(lineageEvent{}.StartNs)
	offTimeNs   = unsafe.Offsetof(lineageEvent{}.TimeNs)
	offExitCode = unsafe.Offsetof(lineageEvent{}.ExitCode)
	offFlags    = unsafe.Offsetof(lineageEvent{}.Flags)
	offArgvLen  = unsafe.Offsetof(lineageExecEvent{}.ArgvLen)
	offFilename = unsafe.Offsetof(lineageExecEvent{}.Filename)
	offArgv     = unsafe.Offsetof(lineageExecEvent{}.Argv)
	argvCap     = len(lineageExecEvent{}.Argv)
	filenameCap = len(lineageExecEvent{}.Filename)
)

// decode parses one ring buffer record (host byte order: the generated
// objects are little-endian only). Fields are read at their offsets, not
// by reflection: the reader decodes every fork, exec and exit the lineage
// makes, on the CPUs the payload is using.
func decode(raw []byte) (Event, error) {
	if len(raw) < eventSize {
		return Event{}, fmt.Errorf("short ring buffer record: %d bytes", len(raw))
	}
	u32 := func(off uintptr) uint32 { return binary.NativeEndian.Uint32(raw[off:]) }
	u64 := func(off uintptr) uint64 { return binary.NativeEndian.Uint64(raw[off:]) }
	ev := Event{
		Kind: Kind(u32(offKind)), PID: int(u32(offPid)), PPID: int(u32(offPpid)), PGID: int(u32(offPgid)),
		SID: int(u32(offSid)), UID: int(u32(offUid)), StartNs: u64(offStartNs), TimeNs: u64(offTimeNs),
		Status: int32(u32(offExitCode)), Flags: u32(offFlags),
	}
	if ev.Kind != KindExec {
		return ev, nil
	}
	if len(raw) < execEventSize {
		return Event{}, fmt.Errorf("short exec record: %d bytes", len(raw))
	}
	name := raw[offFilename : offFilename+uintptr(filenameCap)]
	if i := bytes.IndexByte(name, 0); i >= 0 {
		name = name[:i]
	}
	ev.Filename = string(name)
	argv := raw[offArgv : offArgv+uintptr(min(int(u32(offArgvLen)), argvCap))]
	argv = bytes.TrimRight(argv, "\x00")
	if len(argv) > 0 {
		for _, a := range bytes.Split(argv, []byte{0}) {
			ev.Argv = append(ev.Argv, string(a))
		}
	}
	return ev, nil
}

// Reader reads events from one lineage's ring buffer.
type Reader struct {
	rd  *ringbuf.Reader
	rec ringbuf.Record
}

// ErrFlushed is returned by Read after Flush, once the events that were in
// the buffer have been read; after Close, Read returns ringbuf.ErrClosed.
var ErrFlushed = ringbuf.ErrFlushed

// NewReader opens a reader on the lineage's ring buffer. One reader at a time.
func (l *Lineage) NewReader() (*Reader, error) {
	if l.maps.Events == nil {
		return nil, ErrClosed
	}
	rd, err := ringbuf.NewReader(l.maps.Events)
	if err != nil {
		return nil, fmt.Errorf("opening the lineage ring buffer: %w", err)
	}
	return &Reader{rd: rd}, nil
}

// Read blocks until the next event. After Close or Flush (once the buffer
// has been read to its end) it returns an error for which IsClosed is true.
func (r *Reader) Read() (Event, error) {
	if err := r.rd.ReadInto(&r.rec); err != nil {
		return Event{}, err
	}
	return decode(r.rec.RawSample)
}

// SetDeadline makes Read return what is in the buffer, then an error for
// which IsDeadline is true, once t has passed. The programs wake the reader
// only when the buffer is half full, so a reader drains it on a deadline.
func (r *Reader) SetDeadline(t time.Time) { r.rd.SetDeadline(t) }

// IsDeadline reports whether err says Read's deadline passed.
func IsDeadline(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }

// Flush makes Read return what is in the buffer now, then ErrFlushed.
func (r *Reader) Flush() error { return r.rd.Flush() }

// Close interrupts Read and frees the reader.
func (r *Reader) Close() error { return r.rd.Close() }

// IsClosed reports whether err says the reader was closed or flushed.
func IsClosed(err error) bool { return errors.Is(err, ringbuf.ErrClosed) || errors.Is(err, ErrFlushed) }
