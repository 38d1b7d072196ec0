// queue_pool_test.go tests the pool listing of `gpu-hold queue`.
package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/device"
	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/queue"
)

func TestPrintPool(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	pool := device.Pool{Devices: []device.Dev{{Index: 0, Name: "nvidia0"}, {Index: 1, Name: "nvidia1"}, {Index: 2, Name: "nvidia2"}}}
	holder := queue.Ticket{Seq: 9, Label: "train", Holder: proc.Ident{PID: 42}, Granted: now.Add(-time.Minute), PoolSeq: 3}
	st := queue.PoolStatus{
		Resource: "gpu",
		Devices: []queue.DeviceStatus{
			{Index: 0, Holder: &holder, Until: now.Add(time.Hour)},
			{Index: 1, Holder: &holder},
			{Index: 2, Dead: []queue.Ticket{{Label: "gone\x1b[2J", Holder: proc.Ident{PID: 7}}}},
		},
		Running:   []queue.Ticket{{Seq: 3, Label: "train", Devices: []int{0, 1}, Holder: proc.Ident{PID: 42}, Created: now}},
		Waiters:   []queue.Ticket{{Seq: 4, Label: "big", Count: 3, Holder: proc.Ident{PID: 43}, Created: now}},
		HeadWaits: "first in line: waits for 3 device(s), 0 free",
	}
	var b bytes.Buffer
	printPool(&b, pool, st, now)
	out := b.String()
	for _, want := range []string{"pool of 3 devices", "train (ticket 3)", "13:00:00", "no max hold", "dead: gone", "running  0,1", "3 wanted", "ticket 4: first in line: waits for 3"} {
		if !strings.Contains(out, want) {
			t.Errorf("listing lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("a label's control characters reached the terminal:\n%q", out)
	}
}
