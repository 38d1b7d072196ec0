// yield_test.go owns the test of where --yield may run: not on a pool
// (its keeper goes on one of the pool's devices) nor on the etcd queue.
package hold

import (
	"strings"
	"testing"

	"github.com/gpu-hold/gpu-hold/internal/device"
)

func TestYieldUsable(t *testing.T) {
	pool := &device.Pool{Devices: []device.Dev{{Index: 0, Name: "nvidia0"}, {Index: 1, Name: "nvidia1"}}}
	for _, c := range []struct {
		name    string
		h       holdRun
		mention string
	}{
		{"single token", holdRun{o: Options{Yield: true, Resource: "gpu"}}, ""},
		{"not yielding on a pool", holdRun{o: Options{Resource: "gpu"}, pool: poolHold{pool: pool}}, ""},
		{"pool", holdRun{o: Options{Yield: true, Resource: "gpu"}, pool: poolHold{pool: pool}}, "-r gpu.d0"},
		{"etcd", holdRun{o: Options{Yield: true, Resource: "gpu", Etcd: &Fleet{}}}, "directory queue only"},
	} {
		err := c.h.yieldUsable()
		if c.mention == "" && err != nil || c.mention != "" && (err == nil || !strings.Contains(err.Error(), c.mention)) {
			t.Errorf("%s: %v, want mention %q", c.name, err, c.mention)
		}
	}
}
