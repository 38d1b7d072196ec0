// etcdq.go owns the backend's handle: Open (a client that says nothing
// until it is used), the key layout under PREFIX/<resource>/, and the
// codec of tickets, whose fields anyone with write access to the prefix
// can forge.
package etcdq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/gpu-hold/gpu-hold/queue"
)

// ErrUnreachable: etcd did not answer within the connect bound (the
// queue package's, so that hold tells it without linking this one).
var ErrUnreachable = queue.ErrUnreachable

// maxValue bounds a ticket's value: a larger one is garbage.
const maxValue = 64 << 10

// Queue is one resource's queue in etcd.
type Queue struct {
	cfg      Config
	resource string
	cli      *clientv3.Client
	warn     func(string)
	agreed   bool // cfg.Budget is the fleet's (budget.go)

	mu       sync.Mutex
	reported map[string]int64 // skipped keys already reported: create revision (trust.go)
}

// Open makes the client for resource's queue. It does not contact etcd:
// the first operation does, bounded by the connect timeout (or its ctx).
func Open(cfg Config, resource string, warn func(string)) (*Queue, error) {
	if err := queue.ValidResource(resource); err != nil {
		return nil, err
	}
	if err := cfg.Finish(); err != nil {
		return nil, err
	}
	tc, err := cfg.tlsConfig()
	if err != nil {
		return nil, err
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   cfg.Endpoints,
		DialTimeout: cfg.ConnectTimeout,
		TLS:         tc,
		Username:    cfg.User,
		Password:    cfg.Password,
		Logger:      zap.NewNop(),
		// A dead connection is noticed within a keep-alive interval.
		DialKeepAliveTime:    cfg.TTL / 3,
		DialKeepAliveTimeout: cfg.TTL / 3,
		// gRPC's own reconnect backoff grows to minutes: after an outage
		// longer than the TTL the lease (renewed by etcd's restart) would
		// expire before the client came back. Retry within a keep-alive
		// interval instead.
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: cfg.TTL / 6},
			MinConnectTimeout: cfg.TTL / 6,
		})},
	})
	if err != nil {
		return nil, unreachable(&cfg, err)
	}
	if warn == nil {
		warn = func(string) {}
	}
	return &Queue{cfg: cfg, resource: resource, cli: cli, warn: warn}, nil
}

// unreachable wraps a failed first contact in ErrUnreachable, with what to do.
func unreachable(c *Config, err error) error {
	if errors.Is(err, rpctypes.ErrAuthFailed) || errors.Is(err, rpctypes.ErrPermissionDenied) || errors.Is(err, rpctypes.ErrInvalidAuthToken) {
		return fmt.Errorf("etcd at %s refused user %q (%v): check --etcd-user and its password, and the user's role", strings.Join(c.Endpoints, ","), c.User, err)
	}
	return fmt.Errorf("%w at %s (%v): check that etcd runs there and that --queue, TLS and credentials are right", ErrUnreachable, strings.Join(c.Endpoints, ","), err)
}

// Close closes the client.
func (q *Queue) Close() error { return q.cli.Close() }

// String names the queue for messages.
func (q *Queue) String() string { return q.cfg.String() + "/" + q.resource }

// Keys: PREFIX/<resource>/q/<lease> are the tickets, on their hold's lease;
// PREFIX/<resource>/held/<rev> is written, leaseless, when a ticket is
// granted and removed at its release, so a holder that died holding is
// still known after its lease took its ticket.
func (q *Queue) ticketDir() string { return q.cfg.Prefix + "/" + q.resource + "/q/" }
func (q *Queue) heldDir() string   { return q.cfg.Prefix + "/" + q.resource + "/held/" }
func (q *Queue) ticketKey(lease clientv3.LeaseID) string {
	return q.ticketDir() + strconv.FormatInt(int64(lease), 16)
}
func (q *Queue) heldKey(rev int64) string { return q.heldDir() + fmt.Sprintf("%020d", rev) }

// encode is a ticket's value.
func encode(t queue.Ticket) string {
	t.Seq = 0 // the create revision is the number
	b, _ := json.Marshal(t)
	return string(b)
}

// decode reads a ticket's value: anything too large, not JSON, or for
// another resource is garbage, skipped (Status lists it).
func (q *Queue) decode(val []byte, rev int64) (queue.Ticket, bool) {
	var t queue.Ticket
	if len(val) > maxValue || json.Unmarshal(val, &t) != nil || t.Resource != q.resource || rev <= 0 {
		return t, false
	}
	t.Seq = uint64(rev)
	return t, true
}

// ctx is a context bounded by the connect timeout, for one request.
func (q *Queue) ctx(parent context.Context) (context.Context, context.CancelFunc) {
	if parent == nil {
		parent = context.Background()
	}
	return context.WithTimeout(parent, q.cfg.ConnectTimeout)
}

// entry is one ticket as read: its key, create revision and fields.
type entry struct {
	key string
	rev int64
	t   queue.Ticket
}

// line is the snapshot of a resource's tickets, in create-revision order.
type line struct {
	rev     int64 // the revision the snapshot was read at
	tickets []entry
	skipped []string
}

// readLine reads the tickets in order; what cannot be a live ticket
// (trust.go) is skipped and reported.
func (q *Queue) readLine(ctx context.Context) (*line, error) {
	resp, err := q.cli.Get(ctx, q.ticketDir(), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return nil, err
	}
	l := &line{rev: resp.Header.Revision}
	var skipped []skippedKey
	for _, kv := range resp.Kvs {
		t, why := q.ticketOf(kv)
		if why != "" {
			l.skipped = append(l.skipped, string(kv.Key))
			skipped = append(skipped, skippedKey{key: string(kv.Key), rev: kv.CreateRevision, why: why})
			continue
		}
		l.tickets = append(l.tickets, entry{key: string(kv.Key), rev: kv.CreateRevision, t: t})
	}
	q.report(skipped)
	return l, nil
}

// index is the place of the ticket of create revision rev (-1: gone).
func (l *line) index(rev int64) int {
	for i, e := range l.tickets {
		if e.rev == rev {
			return i
		}
	}
	return -1
}
