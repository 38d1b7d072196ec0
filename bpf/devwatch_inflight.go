// devwatch_inflight.go owns the references to a watched device's file that
// an opener's threads hold while they sleep in a read, write or ioctl of
// it: a process whose fd table is shared (any multi-threaded one, a model
// server) takes one per such call, so its file counts more references
// than fd slots and mappings for as long as the call blocks.
//
// A thread is credited one reference when it sleeps in such a call, its fd
// table is shared, and the call's fd names a file of a checked device in
// that table. A call begun while the table was not shared borrowed the
// file and holds none; but a table no one else shares can be shared again
// only by a clone of the one thread using it, which sleeps: so a table
// shared now was shared when the call began. The fd may have been pointed
// at another file since the call began (dup2), so a credit can stand for
// a reference that is not there; it then hides a reference the openers do
// not hold only if that one is no fd slot's: a file given to a process
// outside the openers makes it an opener (the fd_install and replace_fd
// hooks), and a check credits calls only where those hooks are attached.
package bpf

import (
	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/proc"
)

type threadRec = devwatchThreadRec

// fileCalls are the system calls that hold a reference to the file their
// first argument names for as long as they run.
var fileCalls = map[int64]bool{
	unix.SYS_READ: true, unix.SYS_WRITE: true, unix.SYS_PREAD64: true, unix.SYS_PWRITE64: true,
	unix.SYS_READV: true, unix.SYS_WRITEV: true, unix.SYS_PREADV: true, unix.SYS_PWRITEV: true,
	unix.SYS_PREADV2: true, unix.SYS_PWRITEV2: true, unix.SYS_IOCTL: true,
	unix.SYS_FSYNC: true, unix.SYS_FDATASYNC: true,
}

// slot names one fd of one fd table.
type slot struct{ files, fd uint64 }

// inflight returns, per file of v, the references threads hold in calls
// on it.
func inflight(v view, threads []threadRec) map[uint64]int {
	fileAt := map[slot]uint64{}
	for _, f := range v.files {
		fileAt[slot{f.Files, uint64(f.Fd)}] = f.File
	}
	credit := map[uint64]int{}
	for _, t := range threads {
		if t.FilesCount < 2 || !fileCalls[t.Nr] {
			continue
		}
		if file, ok := fileAt[slot{t.Files, t.Arg0}]; ok {
			credit[file]++
		}
	}
	return credit
}

// credits reads the sleeping threads of the openers that have one of
// files open and returns the references their calls hold (nil where the
// watch credits no call).
func (w *Watch) credits(openers []*proc.Handle, v view, files map[uint64]bool) (map[uint64]int, error) {
	if !w.installs || len(files) == 0 {
		return nil, nil
	}
	holders := map[uint32]bool{}
	for _, f := range v.files {
		holders[f.Tgid] = holders[f.Tgid] || files[f.File]
	}
	var threads []threadRec
	for _, h := range openers {
		if !holders[uint32(h.PID)] {
			continue
		}
		ts, err := readRecs[threadRec](w.objs.AccountThreads, h.FD, "device-watch threads")
		if err != nil {
			return nil, err
		}
		threads = append(threads, ts...)
	}
	return inflight(v, threads), nil
}
