// fleet_test.go tests the queue table's fleet columns: each ticket's host,
// and every holder of a budget over 1.
package main

import (
	"strings"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/queue"
)

func TestPrintQueueHostsAndHolders(t *testing.T) {
	now := time.Now()
	st := queue.Status{Resource: "gpu",
		Holder:  &queue.Ticket{Seq: 5, Label: "a", Host: "node-a", Granted: now},
		Holders: []queue.Ticket{{Seq: 7, Label: "b", Host: "node-b", Granted: now}},
		Waiters: []queue.Ticket{{Seq: 9, Label: "c", Host: "node-c", Created: now}},
	}
	cols, err := pickColumns(defaultColumns)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	printQueue(&out, []resourceView{viewOf(st, now)}, cols, false)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 || !strings.Contains(lines[0], "HOST") {
		t.Fatalf("table:\n%s", out.String())
	}
	for i, want := range [][]string{{"holding", "a", "node-a"}, {"holding", "b", "node-b"}, {"waiting", "c", "node-c"}} {
		for _, w := range want {
			if !strings.Contains(lines[i+1], w) {
				t.Errorf("line %q lacks %q", lines[i+1], w)
			}
		}
	}
}
