// pool.go owns a resource's device pool: the devices a hold can be given
// one by one (each with its nodes, ids and the variables its runtime reads)
// and the nodes every device shares (always allowed). A resource with a
// pool of one or none is a single token, as before pools.
package device

import (
	"fmt"
	"strconv"
	"strings"
)

// Kinds of pool device, by driver family.
const (
	KindNVIDIA = "nvidia"
	KindAMD    = "amd"
	KindNPU    = "npu"
	KindOther  = "other"
)

// Pool is the devices of one resource, in pool order (index 0 first).
type Pool struct {
	Devices []Dev    `json:"devices"`
	Shared  []string `json:"shared,omitempty"` // nodes every device needs (nvidiactl, kfd)
	// Backfill off makes the queue strict FIFO (resources.json "backfill": false).
	NoBackfill bool `json:"no_backfill,omitempty"`
}

// Dev is one device of a pool.
type Dev struct {
	Index int      `json:"index"`
	Name  string   `json:"name"` // nvidia0, renderD128, accel0
	Kind  string   `json:"kind"`
	Nodes []string `json:"nodes"`          // its own device nodes (absolute host paths)
	UUID  string   `json:"uuid,omitempty"` // NVIDIA GPU-..., AMD unique_id
	PCI   string   `json:"pci,omitempty"`
	// KindIndex is its place among the pool's devices of its kind: what
	// HIP_VISIBLE_DEVICES (AMD) counts.
	KindIndex int `json:"kind_index"`
}

// Multi reports whether the pool has more than one device: only then does
// a hold take devices instead of the resource's single token.
func (p Pool) Multi() bool { return len(p.Devices) > 1 }

// QueueName is the queue of device d of resource res: a resource name of
// its own, so `gpu-hold reap` and `gpu-hold queue` see it like any other.
func QueueName(res string, d Dev) string { return res + ".d" + strconv.Itoa(d.Index) }

// Env returns the variables the payload of a hold given devs reads:
// CUDA_VISIBLE_DEVICES by UUID (by minor when the UUID is unknown),
// HIP_VISIBLE_DEVICES and ROCR_VISIBLE_DEVICES by index among AMD devices,
// and GPU_HOLD_DEVICES (pool indices) always. A runtime given an empty list
// sees no device, which is what a hold with none of its kind should see.
func Env(devs []Dev) []string {
	var cuda, hip, pool []string
	for _, d := range devs {
		pool = append(pool, strconv.Itoa(d.Index))
		switch d.Kind {
		case KindNVIDIA:
			id := d.UUID
			if n, ok := strings.CutPrefix(d.Name, "nvidia"); id == "" && ok && plainID(n) {
				id = n // the minor, which is CUDA's index only by PCI order
			} else if id == "" {
				id = strconv.Itoa(d.KindIndex)
			}
			cuda = append(cuda, id)
		case KindAMD:
			hip = append(hip, strconv.Itoa(d.KindIndex))
		}
	}
	env := []string{"GPU_HOLD_DEVICES=" + strings.Join(pool, ",")}
	if has(devs, KindNVIDIA) {
		env = append(env, "CUDA_VISIBLE_DEVICES="+strings.Join(cuda, ","))
	}
	if has(devs, KindAMD) {
		env = append(env, "HIP_VISIBLE_DEVICES="+strings.Join(hip, ","), "ROCR_VISIBLE_DEVICES="+strings.Join(hip, ","))
	}
	return env
}

func has(devs []Dev, kind string) bool {
	for _, d := range devs {
		if d.Kind == kind {
			return true
		}
	}
	return false
}

// Pick returns the devices of p at indices idx.
func (p Pool) Pick(idx []int) ([]Dev, error) {
	out := make([]Dev, 0, len(idx))
	for _, i := range idx {
		if i < 0 || i >= len(p.Devices) {
			return nil, fmt.Errorf("device index %d is not in the pool (0..%d)", i, len(p.Devices)-1)
		}
		out = append(out, p.Devices[i])
	}
	return out, nil
}

// Others returns the devices of p not in idx: what a hold given idx must
// not open.
func (p Pool) Others(idx []int) []Dev {
	got := map[int]bool{}
	for _, i := range idx {
		got[i] = true
	}
	var out []Dev
	for _, d := range p.Devices {
		if !got[d.Index] {
			out = append(out, d)
		}
	}
	return out
}

// numbered renumbers devs in order and gives each its index among its kind.
func numbered(devs []Dev) []Dev {
	kinds := map[string]int{}
	for i := range devs {
		devs[i].Index = i
		devs[i].KindIndex = kinds[devs[i].Kind]
		kinds[devs[i].Kind]++
	}
	return devs
}
