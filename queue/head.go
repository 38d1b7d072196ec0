// head.go owns the at-head notice: a waiter's caller can be told, once,
// that its ticket has reached the head of the queue (no waiting ticket
// ahead of it, the token perhaps still held), without asking to be told of
// every change of its place, which would wake it on every hand-off. A hold
// makes what it needs only once it holds (its tracker) from then on.
package queue

import (
	"context"
	"sync"
)

type headKey struct{}

// headNotice is the callback and its once.
type headNotice struct {
	once sync.Once
	f    func()
}

// WithHeadNotice returns a context whose Wait calls f once (from Wait's
// goroutine, so f should not block) when the ticket is first seen at the
// head of the queue. A ticket granted at once may never be seen there.
func WithHeadNotice(ctx context.Context, f func()) context.Context {
	return context.WithValue(ctx, headKey{}, &headNotice{f: f})
}

// atHead runs ctx's head notice, if any, the first time only.
func atHead(ctx context.Context) {
	if n, ok := ctx.Value(headKey{}).(*headNotice); ok {
		n.once.Do(n.f)
	}
}
