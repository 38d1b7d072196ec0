// fleet.go owns the queue backend's choice (the directory, or the fleet
// queue on etcd when --queue names it), for holds and reaps, and what a
// failed first contact with etcd means for the exit code.
package hold

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gpu-hold/gpu-hold/queue"
)

// Fleet is the queue on etcd that a hold or reap uses instead of the
// directory. cmd makes it in gpu-hold-fleet, the one binary that links
// the etcd client, so hold knows only how to open it and what the record
// says of it.
type Fleet struct {
	// Open opens resource's queue; warn takes the backend's warnings.
	Open func(resource string, warn func(string)) (queue.Queue, error)
	Name string        // the queue's address, for the record
	TTL  time.Duration // the lease's TTL, for the record
	// Interval is how often the lease is renewed: the holder's deadline is
	// one interval before etcd may expire it (lease.go).
	Interval time.Duration
}

func (f *Fleet) String() string { return f.Name }

// FenceEnv carries the fencing token to the payload.
const FenceEnv = "GPU_HOLD_FENCE"

// openQueue opens the resource's queue: etcd when o.Etcd is set (the
// local resource dir is still made, for the records), else the directory.
func (h *holdRun) openQueue() (queue.Queue, error) {
	o, log := &h.o, h.o.Log
	warn := func(msg string) { log.Warn().Msg(msg) }
	dq, err := queue.OpenDir(o.Dir, o.Resource, queue.DirOptions{Warn: warn})
	if err != nil || o.Etcd == nil {
		return dq, err
	}
	if c, ok := dq.(interface{ Close() error }); ok {
		c.Close()
	}
	return o.Etcd.Open(o.Resource, warn)
}

// openReapQueue opens res's queue for a reap: etcd when o.Etcd is set.
func openReapQueue(o ReapOptions, res string) (queue.Queue, error) {
	if o.Etcd == nil {
		return queue.OpenDir(o.Dir, res, queue.DirOptions{Warn: func(msg string) { o.Log.Warn().Msg(msg) }})
	}
	return o.Etcd.Open(res, func(msg string) { o.Log.Warn().Msg(msg) })
}

// enqueueOn takes the ticket on q; etcd's first contact is bounded by -w
// too.
func (h *holdRun) enqueueOn(ctx context.Context, q queue.Queue, t queue.Ticket) (queue.Waiter, error) {
	eq, ok := q.(queue.CtxEnqueuer)
	if !ok {
		return q.Enqueue(t)
	}
	if h.o.Wait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, h.o.Wait)
		defer cancel()
	}
	return eq.EnqueueCtx(ctx, t)
}

// enqueueFailed maps a failed Enqueue to the hold's error: etcd
// unreachable is the queue's failure (75); anything else gpu-hold's own.
func enqueueFailed(err error) error {
	if errors.Is(err, queue.ErrUnreachable) {
		return &Error{Code: ExitQueue, Err: fmt.Errorf("%v; nothing was queued", err)}
	}
	return &Error{Code: ExitUsage, Err: err}
}

// removedWhy says who removed a waiting ticket: gpu-hold cancel or an
// admin, unless the queue knows better (an etcd lease that expired).
func removedWhy(err error) string {
	if err.Error() == queue.ErrRemoved.Error() {
		return "gpu-hold cancel or an admin"
	}
	return strings.TrimPrefix(err.Error(), queue.ErrRemoved.Error()+": ")
}
