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
	"golang.org/x/sys/unix"
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

// unreadBytes is how much of the ring buffer no reader has consumed: the
// producer's position less the consumer's, read from the ring's first two
// pages mapped read-only (a full reader would map and fault in the whole
// ring, on a spare taker's path).
func (l *Lineage) unreadBytes() (int, error) {
	if l.maps.Events == nil {
		return 0, ErrClosed
	}
	page := os.Getpagesize()
	m, err := unix.Mmap(l.maps.Events.FD(), 0, 2*page, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return 0, fmt.Errorf("mapping the lineage ring buffer's positions: %w", err)
	}
	defer unix.Munmap(m)
	consumer, producer := binary.NativeEndian.Uint64(m), binary.NativeEndian.Uint64(m[page:])
	return int(producer - consumer), nil
}

// Reader reads events from one lineage's ring buffer.
type Reader struct {
	rd    *ringbuf.Reader
	rec   ringbuf.Record
	woken chan struct{}
	wf    *os.File // the ring buffer, in Go's netpoller (nil: no wake-ups)
}

// NewReader opens a reader on the lineage's ring buffer. One reader at a time.
func (l *Lineage) NewReader() (*Reader, error) {
	if l.maps.Events == nil {
		return nil, ErrClosed
	}
	rd, err := ringbuf.NewReader(l.maps.Events)
	if err != nil {
		return nil, fmt.Errorf("opening the lineage ring buffer: %w", err)
	}
	r := &Reader{rd: rd, woken: make(chan struct{}, 1)}
	r.watch(l.maps.Events.FD())
	return r, nil
}

// Woken receives when the programs woke the reader: the buffer is half
// full, and a reader that drains only on its period should drain now.
func (r *Reader) Woken() <-chan struct{} { return r.woken }

// watch turns the programs' wake-ups into sends on woken through Go's
// netpoller, so that no thread sleeps in epoll_wait for them. Without it
// (the fd cannot join the netpoller) the reader only drains on its period.
func (r *Reader) watch(mapFD int) {
	fd, err := unix.FcntlInt(uintptr(mapFD), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return
	}
	// O_NONBLOCK is what makes os.NewFile register the fd with the
	// netpoller (edge-triggered: one readiness per wake-up).
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return
	}
	f := os.NewFile(uintptr(fd), "lineage ring buffer")
	rc, err := f.SyscallConn()
	if err != nil || f.SetReadDeadline(time.Time{}) != nil { // the deadline call fails unless polled
		f.Close()
		return
	}
	r.wf = f
	go func() {
		first := true
		rc.Read(func(uintptr) bool { // returns when f is closed
			if !first {
				select {
				case r.woken <- struct{}{}:
				default:
				}
			}
			first = false
			return false // wait for the next readiness
		})
	}()
}

// Drain hands fn every event in the buffer now, in order, and returns
// without waiting for more; bad counts the records that did not decode. Its
// error is not nil only when the reader is closed. The programs do not wake
// a reader for each event, and a reader that sleeps in epoll_wait between
// batches costs a Go process far more wake-ups than the events themselves
// (the runtime hands off the blocked thread's P): the tracker drains on a
// Go timer instead.
func (r *Reader) Drain(fn func(Event)) (bad int, err error) {
	r.rd.SetDeadline(time.Now().Add(-time.Millisecond)) // epoll_wait with no wait
	for {
		if err := r.rd.ReadInto(&r.rec); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return bad, nil
			}
			return bad, err
		}
		e, err := decode(r.rec.RawSample)
		if err != nil {
			bad++
			continue
		}
		fn(e)
	}
}

// Close frees the reader.
func (r *Reader) Close() error {
	if r.wf != nil {
		r.wf.Close()
	}
	return r.rd.Close()
}
