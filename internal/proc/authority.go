// authority.go owns acting with another user's authority: a root process
// that ends a user's processes sends its signals from a thread whose
// credentials are that user's, so the kernel, not a check of ours that a
// setuid exec could outrun, decides what may be signalled.
package proc

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// nogroup is the group the authority thread runs as: a user's authority to
// signal comes from its uid alone, and no group of root's may come along.
const nogroup = 65534

// Authority runs actions (signals, writes to cgroup.kill) on one OS thread
// that carries a user's credentials. A nil *Authority acts as this process.
type Authority struct {
	UID  int
	work chan func()
}

// As returns the authority of uid: nil (this process's own) when uid is
// this process's effective uid, a thread with uid's credentials when this
// process is root, and an error otherwise (nobody else can take on another
// user's authority).
func As(uid int) (*Authority, error) {
	switch euid := os.Geteuid(); {
	case uid == euid:
		return nil, nil
	case euid != 0:
		return nil, fmt.Errorf("uid %d cannot act as uid %d: only root can", euid, uid)
	}
	a := &Authority{UID: uid, work: make(chan func())}
	errc := make(chan error, 1)
	go a.serve(errc, nil)
	if err := <-errc; err != nil {
		return nil, err
	}
	return a, nil
}

// serve drops the thread's credentials, then runs actions until Close. The
// thread is never unlocked: Go must not hand a thread with another user's
// credentials to other goroutines, so it exits with this one. It is never
// the main thread, whose credentials are the process's for /proc and for
// kill(2): the user would own the reaper (and Go cannot end that thread).
// locked (may be nil) is closed once the thread is locked.
func (a *Authority) serve(errc chan<- error, locked chan<- struct{}) {
	runtime.LockOSThread()
	if unix.Gettid() == unix.Getpid() {
		// While this goroutine holds the main thread, no other can get it.
		elsewhere := make(chan struct{})
		go a.serve(errc, elsewhere)
		<-elsewhere
		runtime.UnlockOSThread()
		return
	}
	if locked != nil {
		close(locked)
	}
	if err := dropThreadTo(a.UID); err != nil {
		errc <- fmt.Errorf("cannot take on the authority of uid %d: %v", a.UID, err)
		return
	}
	errc <- nil
	for f := range a.work {
		f()
	}
}

// dropThreadTo sets the calling thread's groups, gids and uids. The raw
// syscalls change this thread only (Go's syscall.Setresuid would change
// every thread of the process).
func dropThreadTo(uid int) error {
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, 0, 0, 0); e != 0 {
		return fmt.Errorf("setgroups: %v", e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, nogroup, nogroup, nogroup); e != 0 {
		return fmt.Errorf("setresgid: %v", e)
	}
	u := uintptr(uid)
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, u, u, u); e != 0 {
		return fmt.Errorf("setresuid: %v", e)
	}
	return nil
}

// Do runs f with the authority and returns its error. f must not start
// goroutines of its own: only the calling one runs on the thread.
func (a *Authority) Do(f func() error) error {
	if a == nil {
		return f()
	}
	errc := make(chan error, 1)
	a.work <- func() { errc <- f() }
	return <-errc
}

// Signal sends sig through h with the authority.
func (a *Authority) Signal(h *Handle, sig syscall.Signal) error {
	return a.Do(func() error { return h.Signal(sig) })
}

// Close ends the thread. A nil Authority has nothing to close.
func (a *Authority) Close() {
	if a != nil {
		close(a.work)
	}
}

// Denied reports whether err is the kernel refusing a signal or a write
// for lack of authority.
func Denied(err error) bool {
	return err != nil && (errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES))
}
