// queue_locker_test.go owns the test of how gpu-hold queue shows a process
// that holds a queue's locks with no ticket: named below the table, the
// token not called free, its command (its own text) unable to drive the
// terminal.
package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/queue"
)

func TestQueueShowsLocker(t *testing.T) {
	lk := queue.Locker{Lock: "token", Process: proc.Ident{PID: 4242, Start: 9}, UID: 0, Comm: "flock",
		Cmd: []string{"flock", "token", "x\x1b]0;PWNED\x07"}, Started: time.Now()}
	views := []resourceView{viewOf(queue.Status{Resource: "gpu", Waiters: []queue.Ticket{}, Lockers: []queue.Locker{lk}}, time.Now()),
		viewOf(queue.Status{Resource: "npu", Waiters: []queue.Ticket{}}, time.Now())}
	var b bytes.Buffer
	printQueue(&b, views, columns, false)
	out := b.String()
	if strings.ContainsAny(out, "\x1b\x07") || strings.Contains(out, "gpu: token free") || !strings.Contains(out, "npu: token free") ||
		!strings.Contains(out, "gpu: the token is locked by pid 4242 (root: flock token x\\x1b]0;PWNED\\x07; running since ") ||
		!strings.Contains(out, "It holds no ticket") {
		t.Errorf("gpu-hold queue with a locker:\n%q", out)
	}
	var doc queueDoc
	b.Reset()
	if err := writeJSON(&b, queueDoc{Resources: views}); err != nil || json.Unmarshal(b.Bytes(), &doc) != nil {
		t.Fatalf("JSON: %v\n%s", err, b.String())
	}
	if l := doc.Resources[0].Lockers; len(l) != 1 || l[0].Process.PID != 4242 || l[0].User != "root" || l[0].Lock != "token" {
		t.Errorf("--json lockers %+v", l)
	}
}
