// poll.go owns waiting on fds (pidfds, a pressure trigger) until one is
// ready, a timeout passes or a context ends, with no goroutine spinning.
package proc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// Poll polls fds for up to timeout, returning early when ctx ends (with
// ctx's error). It returns the number of fds that are ready. An eventfd,
// written when ctx ends, is polled beside them, so no goroutine spins.
func Poll(ctx context.Context, fds []unix.PollFd, timeout time.Duration) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return 0, fmt.Errorf("eventfd: %v", err)
	}
	defer unix.Close(efd)
	stop := context.AfterFunc(ctx, func() {
		unix.Write(efd, []byte{1, 0, 0, 0, 0, 0, 0, 0})
	})
	defer stop()
	all := append(append(make([]unix.PollFd, 0, len(fds)+1), fds...), unix.PollFd{Fd: int32(efd), Events: unix.POLLIN})
	deadline := time.Now().Add(timeout)
	for {
		ms := max(0, int((time.Until(deadline)+time.Millisecond-1)/time.Millisecond))
		n, err := unix.Poll(all, ms)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("poll: %v", err)
		}
		if cerr := ctx.Err(); cerr != nil {
			return 0, cerr
		}
		for i := range fds {
			fds[i].Revents = all[i].Revents
		}
		return n, nil
	}
}
