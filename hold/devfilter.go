// devfilter.go owns a pool hold's cgroup device filter: attached to the
// payload's cgroup before the payload starts, closed when the hold ends,
// and, where there is no cgroup, one line at start and in the record that
// says nothing keeps the payload from the pool's other devices.
package hold

import (
	"fmt"

	"github.com/gpu-hold/gpu-hold/internal/device"
)

// filterDevices puts the cgroup device filter on the payload's cgroup, denying the
// pool's devices this hold was not given; without a cgroup it says, once
// and in the record, that nothing keeps the payload from them.
func (h *holdRun) filterDevices() *device.Filter {
	ph := &h.pool
	if ph.grant == nil {
		return nil
	}
	log := h.o.Log
	defer h.recordPool()
	if h.cg == nil {
		ph.info.Filter = "none: the payload has no cgroup (run as root on cgroup v2 for the device filter), so it can open the pool's other devices"
		log.Warn().Msg("no device filter: " + ph.info.Filter)
		return nil
	}
	f, err := device.Fence(h.cg.Path, *ph.pool, ph.grant.Devices())
	if err != nil {
		ph.info.Filter = "none: " + err.Error()
		log.Warn().Err(err).Msg("no device filter on the payload's cgroup")
		return nil
	}
	ph.info.Filter = fmt.Sprintf("cgroup device filter on %s denies %d node(s) of the pool's other devices", h.cg.Path, len(f.Denied))
	log.Info().Strs("denied", f.Denied).Msg("device filter attached to the payload's cgroup")
	return f
}

// unfenced notes a payload that had to start without its cgroup, and so
// without the filter.
func (h *holdRun) unfenced(f *device.Filter) {
	if f == nil || h.cg != nil {
		return
	}
	f.Close()
	h.pool.info.Filter = "none: the payload could not be started in its cgroup, so it can open the pool's other devices"
	h.o.Log.Warn().Msg("no device filter: " + h.pool.info.Filter)
	h.recordPool()
}
