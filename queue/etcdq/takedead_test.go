// takedead_test.go owns the check of a reap's refusal to take the token
// when its own ticket is gone from an otherwise empty line.
package etcdq

import (
	"errors"
	"testing"

	"github.com/gpu-hold/gpu-hold/queue"
)

// TestTakeDeadOwnTicketGone: a ticket deleted between its put and the
// read (anyone who can write the prefix can) is refused with a reason,
// never a crash on an empty line.
func TestTakeDeadOwnTicketGone(t *testing.T) {
	q := &Queue{cfg: Config{Budget: 1}, resource: "gpu"}
	err := (&line{}).takeDeadRefusal(42, q)
	if !errors.Is(err, queue.ErrNotDead) {
		t.Fatalf("own ticket gone: got %v, want ErrNotDead with the reason", err)
	}
	if err := (&line{tickets: []entry{{rev: 42}}}).takeDeadRefusal(42, q); err != nil {
		t.Fatalf("own ticket first within the budget: got %v, want nil", err)
	}
}
