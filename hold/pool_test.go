// pool_test.go tests a pool hold's bound (what backfill trusts) and its
// max hold counted from the grant.
package hold

import (
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/device"
	"github.com/gpu-hold/gpu-hold/queue"
)

func TestPoolBound(t *testing.T) {
	base := Options{MaxHold: time.Hour, Grace: 10 * time.Second, SurvivorWait: 30 * time.Second, DeviceWait: time.Minute}
	cases := []struct {
		name   string
		policy device.Policy
		max    time.Duration
		want   time.Duration
	}{
		{"warn", device.PolicyWarn, time.Hour, time.Hour + 50*time.Second},
		{"wait adds the device wait", device.PolicyWait, time.Hour, time.Hour + 50*time.Second + time.Minute},
		{"fail adds the device wait", device.PolicyFail, time.Hour, time.Hour + 50*time.Second + time.Minute},
		{"no max hold, no bound", device.PolicyWarn, 0, 0},
	}
	for _, c := range cases {
		o := base
		o.DeviceHolders, o.MaxHold = c.policy, c.max
		h := &holdRun{o: o}
		if got := h.bound(); got != c.want {
			t.Errorf("%s: bound %v, want %v", c.name, got, c.want)
		}
	}
}

func TestPoolMaxHoldFromGrant(t *testing.T) {
	h := &holdRun{o: Options{MaxHold: time.Hour}}
	if got := h.maxHoldLeft(); got != time.Hour {
		t.Fatalf("a token hold's max hold runs from the payload's start: %v", got)
	}
	h.pool.grant = &queue.PoolGrant{}
	h.granted = time.Now().Add(-20 * time.Minute)
	if got := h.maxHoldLeft(); got > 40*time.Minute || got < 39*time.Minute {
		t.Fatalf("a pool hold granted 20m ago has %v of its 1h left, want about 40m", got)
	}
	h.granted = time.Now().Add(-2 * time.Hour)
	if got := h.maxHoldLeft(); got <= 0 || got > time.Second {
		t.Fatalf("a pool hold past its max hold at the start gets %v, want a moment", got)
	}
}
