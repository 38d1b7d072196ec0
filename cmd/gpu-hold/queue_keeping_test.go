// queue_keeping_test.go owns the test of how gpu-hold queue shows a holder
// that keeps its token after its payload ended: what for, below the table
// and in the holder's JSON, with the holder's note's text escaped; and, of
// a pool, per device, with who locks a device with no ticket.
package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/device"
	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/queue"
)

var testKeeping = &queue.Keeping{Since: time.Now(), Holders: []queue.KeptNode{{Node: "/dev/nvidia0", PID: 4242, UID: 1000, User: "bob", Command: "python\x1b]0;x\x07 train.py"}}}

func TestQueueShowsKeeping(t *testing.T) {
	h := queue.Ticket{Seq: 7, Label: "job", Holder: proc.Ident{PID: 99, Start: 1}, Granted: time.Now(), Keeping: testKeeping}
	views := []resourceView{viewOf(queue.Status{Resource: "gpu", Holder: &h, Waiters: []queue.Ticket{}}, time.Now())}
	var b bytes.Buffer
	printQueue(&b, views, columns, false)
	out := b.String()
	if strings.ContainsAny(out, "\x1b\x07") || !strings.Contains(out, "gpu: ticket 7's payload ended, but the holder keeps the token while /dev/nvidia0 is held by pid 4242 (bob: python\\x1b]0;x\\x07 train.py)") ||
		!strings.Contains(out, "cancel -r gpu 7") {
		t.Errorf("gpu-hold queue with a keeping holder:\n%s", out)
	}
	var doc queueDoc
	b.Reset()
	if err := writeJSON(&b, queueDoc{Resources: views}); err != nil || json.Unmarshal(b.Bytes(), &doc) != nil {
		t.Fatalf("JSON: %v\n%s", err, b.String())
	}
	if k := doc.Resources[0].Holding.Keeping; k == nil || len(k.Holders) != 1 || k.Holders[0].PID != 4242 || k.Holders[0].Node != "/dev/nvidia0" {
		t.Errorf("--json holding.keeping %+v", k)
	}
}

func TestQueuePoolShowsKeepingAndLockers(t *testing.T) {
	pool := device.Pool{Devices: []device.Dev{{Name: "gpu0"}, {Name: "gpu1"}}}
	lk := queue.Locker{Lock: "token", Process: proc.Ident{PID: 5151, Start: 9}, UID: 0, Comm: "flock", Cmd: []string{"flock", "x\x1b[2J"}, Started: time.Now()}
	st := queue.PoolStatus{Resource: "gpu", Devices: []queue.DeviceStatus{
		{Index: 0, Holder: &queue.Ticket{Label: "job", Granted: time.Now()}, Keeping: testKeeping},
		{Index: 1, Lockers: []queue.Locker{lk}},
	}}
	var b bytes.Buffer
	printPool(&b, pool, st, time.Now())
	out := b.String()
	if strings.ContainsAny(out, "\x1b\x07") || !strings.Contains(out, "device 0 (gpu0): the holder keeps the token while /dev/nvidia0 is held by pid 4242") ||
		!strings.Contains(out, "device 1 (gpu1): the token is locked by pid 5151 (root: flock x\\x1b[2J;") {
		t.Errorf("gpu-hold queue -r POOL with a keeping holder and a locker:\n%s", out)
	}
}
