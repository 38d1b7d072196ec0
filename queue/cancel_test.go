// cancel_test.go owns the test of Cancel's messages: each names the ticket
// once, and still matches its sentinel.
package queue

import (
	"errors"
	"strings"
	"testing"
)

func TestCancelMessagesSayItOnce(t *testing.T) {
	q := openQ(t, t.TempDir(), "gpu")
	g := take(t, q, "holderA")
	defer g.Release()
	w, err := q.Enqueue(Ticket{Label: "waiterB", UID: 4242})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		seq      uint64
		uid      int
		sentinel error
		says     string
	}{
		{g.Ticket().Seq, 0, ErrHolding, "holderA (ticket 1, pid "},
		{w.Ticket().Seq, 4243, ErrNotOwner, "waiterB (ticket 2, pid "},
	} {
		err := q.Cancel(c.seq, c.uid)
		msg := err.Error()
		if !errors.Is(err, c.sentinel) || !strings.Contains(msg, c.says) {
			t.Errorf("Cancel(%d): %q, want %v naming %q", c.seq, msg, c.sentinel, c.says)
		}
		for _, twice := range []string{"ticket 1", "ticket 2", "holds the token", "owner"} {
			if strings.Count(msg, twice) > 1 {
				t.Errorf("Cancel(%d): %q says %q more than once", c.seq, msg, twice)
			}
		}
	}
}
