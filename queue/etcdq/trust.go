// trust.go owns what a key under PREFIX/<resource>/q/ must be to count as
// a ticket. Anyone who may write the prefix can put keys there, and a key
// that outlives every hold wedges the queue, so a key counts only when
// etcd's own metadata, which no writer can forge, puts it on the lease its
// name claims: the holder's session, whose end takes the key with it.
// Anything else cannot be a live waiter or holder: it is skipped, and
// reported once (per key and create revision), as the directory queue
// skips planted names.
package etcdq

import (
	"fmt"
	"strconv"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/gpu-hold/gpu-hold/queue"
)

// leaseOf is the lease a ticket key's name claims: the part after q/ as
// ticketKey writes it (lower-case hex, no sign, no leading zero); 0 for
// any other name.
func (q *Queue) leaseOf(key []byte) clientv3.LeaseID {
	name, ok := strings.CutPrefix(string(key), q.ticketDir())
	if !ok {
		return 0
	}
	id, err := strconv.ParseInt(name, 16, 64)
	if err != nil || id <= 0 || strconv.FormatInt(id, 16) != name {
		return 0
	}
	return clientv3.LeaseID(id)
}

// notLive says why kv cannot be a live ticket ("" when it can be), from
// its name and lease alone (a keys-only read has no value).
func (q *Queue) notLive(kv *mvccpb.KeyValue) string {
	id := q.leaseOf(kv.Key)
	switch {
	case id == 0:
		return "its name is not a lease id in hex"
	case kv.Lease == 0:
		return "it is on no lease, so no hold's end would remove it"
	case clientv3.LeaseID(kv.Lease) != id:
		return fmt.Sprintf("it is on lease %x, not on lease %x that its name claims", kv.Lease, int64(id))
	}
	return ""
}

// ticketOf is kv's ticket, or why it is none.
func (q *Queue) ticketOf(kv *mvccpb.KeyValue) (queue.Ticket, string) {
	if why := q.notLive(kv); why != "" {
		return queue.Ticket{}, why
	}
	t, ok := q.decode(kv.Value, kv.CreateRevision)
	if !ok {
		return t, "its value is not a ticket of " + q.resource
	}
	return t, ""
}

// report warns of the skipped keys not reported before, and forgets the
// ones that are gone (so the memory is bounded by what etcd holds).
func (q *Queue) report(skipped []skippedKey) {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := make(map[string]int64, len(skipped))
	for _, s := range skipped {
		now[s.key] = s.rev
		if q.reported[s.key] != s.rev {
			q.warn(fmt.Sprintf("skipping key %q (create revision %d) in the etcd queue %s: %s; it cannot be a live waiter or holder. Delete it if nobody needs it: etcdctl del %q", s.key, s.rev, q, s.why, s.key))
		}
	}
	q.reported = now
}

// skippedKey is a key under q/ that is not a ticket, and why.
type skippedKey struct {
	key string
	rev int64
	why string
}
