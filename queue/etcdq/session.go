// session.go owns a hold's lease: granted at Enqueue, kept alive by this
// package's own loop of single keep-alives (every TTL/3), and the deadline
// a holder keeps on the monotonic clock: the send time of the last
// acknowledged keep-alive, plus the TTL, less one interval. It does not use
// the client's KeepAlive channel or a concurrency.Session's Done: both
// learn of a lost lease only after the TTL, when the server may already
// have granted the token to the next ticket.
package etcdq

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

type session struct {
	cli      *clientv3.Client
	id       clientv3.LeaseID
	ttl      time.Duration
	interval time.Duration

	mu       sync.Mutex
	deadline time.Time // monotonic: time.Now() readings only
	acked    chan struct{}
	gone     chan struct{} // closed once etcd said the lease is gone
	goneOnce sync.Once

	stop     chan struct{}
	stopOnce sync.Once
	ctx      context.Context // ends a keep-alive in flight when stopped
	cancel   context.CancelFunc
	done     chan struct{}
}

// keepAlives is how many keep-alives a lease gets per TTL: the holder's
// deadline leaves etcd one interval (TTL/keepAlives) to expire the lease
// in, which the payload's end after a loss must fit (hold/lease.go).
const keepAlives = 3

// Interval is how often a lease of c's TTL is renewed.
func (c *Config) Interval() time.Duration { return c.TTL / keepAlives }

// retryAfterFailure is how soon a keep-alive that found etcd unreachable
// is tried again.
const retryAfterFailure = 200 * time.Millisecond

// newSession grants a lease of ttl, bounded by ctx, and starts keeping it.
func newSession(ctx context.Context, cli *clientv3.Client, ttl time.Duration) (*session, error) {
	t0 := time.Now()
	resp, err := cli.Grant(ctx, int64(ttl/time.Second))
	if err != nil {
		return nil, err
	}
	s := &session{cli: cli, id: resp.ID, ttl: time.Duration(resp.TTL) * time.Second, acked: make(chan struct{}),
		gone: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	s.interval = s.ttl / keepAlives
	s.deadline = t0.Add(s.ttl - s.interval)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	go s.keep()
	return s, nil
}

// keep renews the lease every interval until stopped or the lease is gone.
func (s *session) keep() {
	defer close(s.done)
	wait := s.interval
	for {
		select {
		case <-s.stop:
			return
		case <-s.gone:
			return
		case <-time.After(wait):
		}
		wait = s.interval
		if !s.renew() {
			wait = retryAfterFailure
		}
	}
}

// renew sends one keep-alive; an acknowledged one moves the deadline. It
// reports whether etcd answered.
func (s *session) renew() bool {
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(s.ctx, s.interval)
	resp, err := s.cli.KeepAliveOnce(ctx, s.id)
	cancel()
	switch {
	case err == nil && resp.TTL > 0:
		s.mu.Lock()
		if d := t0.Add(time.Duration(resp.TTL)*time.Second - s.interval); d.After(s.deadline) {
			s.deadline = d
		}
		close(s.acked)
		s.acked = make(chan struct{})
		s.mu.Unlock()
		return true
	case err == nil, errors.Is(err, rpctypes.ErrLeaseNotFound):
		s.goneOnce.Do(func() { close(s.gone) })
		return true
	}
	return false
}

// Deadline is the instant past which the lease may have expired.
func (s *session) Deadline() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deadline
}

// expired reports whether the deadline has passed.
func (s *session) expired() bool { return !time.Now().Before(s.Deadline()) }

// nextAck is closed at the next acknowledged keep-alive.
func (s *session) nextAck() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.acked
}

// stopKeeping ends the keep-alives (the lease then expires by its TTL).
func (s *session) stopKeeping() {
	s.stopOnce.Do(func() {
		close(s.stop)
		s.cancel()
	})
	<-s.done
}

// close stops the keeping and revokes the lease (its keys go with it),
// bounded by timeout.
func (s *session) close(timeout time.Duration) error {
	s.stopKeeping()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_, err := s.cli.Revoke(ctx, s.id)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return nil
	}
	return err
}
