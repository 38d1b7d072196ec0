// budget.go owns the resource's budget as the fleet agrees on it: the key
// PREFIX/<resource>/budget, put by the first hold with its budget and read
// by every later one. A hold that names another budget is refused, so two
// configs cannot let more holders in than either allows; one that names
// none takes the fleet's.
package etcdq

import (
	"context"
	"fmt"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// maxBudget bounds a budget read from etcd (anything larger is garbage).
const maxBudget = 1 << 20

func (q *Queue) budgetKey() string { return q.cfg.Prefix + "/" + q.resource + "/budget" }

// agreeBudget reads (and, with create, first puts) the fleet's budget.
func (q *Queue) agreeBudget(ctx context.Context, create bool) error {
	if q.agreed {
		return nil
	}
	key := q.budgetKey()
	var val []byte
	if create {
		resp, err := q.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, strconv.Itoa(q.cfg.Budget))).Else(clientv3.OpGet(key)).Commit()
		if err != nil {
			return unreachable(&q.cfg, err)
		}
		if resp.Succeeded {
			q.agreed = true
			return nil
		}
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			val = kvs[0].Value
		}
	} else {
		resp, err := q.cli.Get(ctx, key)
		if err != nil {
			return unreachable(&q.cfg, err)
		}
		if len(resp.Kvs) == 0 {
			return nil // nobody has queued yet: the config's
		}
		val = resp.Kvs[0].Value
	}
	n, err := strconv.Atoi(string(val))
	if err != nil || n < 1 || n > maxBudget {
		return fmt.Errorf("the fleet's budget for %s in etcd (%s = %.20q) is not a number from 1 to %d: ask an admin to set it (etcdctl put %s 1)", q.resource, key, val, maxBudget, key)
	}
	if n != q.cfg.Budget && q.cfg.budgetGiven {
		return fmt.Errorf("this hold's budget for %s is %d, but the fleet's is %d (%s): use ?budget=%d, or have an admin change the key (etcdctl put %s %d) when no hold runs", q.resource, q.cfg.Budget, n, key, n, key, q.cfg.Budget)
	}
	q.cfg.Budget, q.agreed = n, true
	return nil
}
