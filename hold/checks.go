// checks.go owns the hold's side of the device-holder check (baseline at
// the grant, scan after teardown, warn/wait/fail), of the memory floor and
// of the metrics. The checks themselves are packages device, memfloor and
// metrics.
package hold

import (
	"context"
	"os"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/device"
	"github.com/gpu-hold/gpu-hold/internal/memfloor"
	"github.com/gpu-hold/gpu-hold/internal/metrics"
	"github.com/gpu-hold/gpu-hold/internal/record"
)

// devicePatterns resolves the device nodes this hold checks: --device, else
// the resource's configured list.
func devicePatterns(o *Options) ([]string, error) {
	if len(o.Devices) > 0 {
		return device.CheckFlags(o.Devices)
	}
	res, err := device.LoadResourcesWarn(o.Dir, func(m string) { o.Log.Warn().Msg(m) })
	if err != nil {
		return nil, err
	}
	return device.Patterns(device.LookupResource(res, o.Resource), nil), nil
}

// deviceBaseline scans the holders present before the payload starts:
// system daemons are not blamed on the payload.
func (h *holdRun) deviceBaseline() device.Baseline {
	if len(h.devices) == 0 {
		return device.Baseline{}
	}
	hs, err := device.ScanHolders(h.devices)
	if err != nil {
		h.o.Log.Warn().Err(err).Msg("cannot scan device holders before the payload; all holders found later are reported")
	}
	return device.NewBaseline(hs)
}

// checkDevices reports every process outside the baseline that still holds
// the device after teardown, before the token is released; under
// --device-holders=wait|fail it keeps the token while one is left
// (withhold.go). A signal on sigc (TERM, INT, HUP, gpu-hold cancel) ends
// the wait and the keeping: the token then goes on with the holders on
// record.
func (h *holdRun) checkDevices(ctx context.Context, baseline device.Baseline, sigc chan os.Signal) {
	if len(h.devices) == 0 {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	signalled := watchSignal(ctx, cancel, sigc)
	defer signalled()
	check := h.scanDevices(ctx, baseline)
	if check.KeepsToken() {
		h.withhold(ctx, check, baseline, signalled)
	}
}

// scanDevices runs the check after teardown, reports the holders it finds
// (log and record) and sets the result of --device-holders=fail.
func (h *holdRun) scanDevices(ctx context.Context, baseline device.Baseline) device.Check {
	o, log := &h.o, h.o.Log
	// Only --device-holders=wait waits for them to go; warn and fail look once.
	bound := time.Duration(0)
	if o.DeviceHolders == device.PolicyWait {
		bound = o.DeviceWait
	}
	check, err := device.CheckHolders(ctx, o.DeviceHolders, h.devices, baseline, bound)
	if err != nil && ctx.Err() == nil {
		log.Warn().Err(err).Msg("device-holder check incomplete")
	}
	hs := check.Holders
	h.deviceHolders = len(hs)
	if len(hs) == 0 {
		return check
	}
	for _, dh := range hs {
		log.Error().Int("pid", dh.PID).Uint64("start", dh.Start).Int("uid", dh.UID).Str("user", dh.User).
			Str("command", dh.Command).Str("node", dh.Node).Interface("drm", dh.DRM).
			Msg("device still held after teardown by a process outside the lineage")
	}
	h.recordHolders(hs, nil, 0, "")
	if check.Failed() {
		h.res.Code, h.res.Cause = ExitDeviceHolders, record.CauseDeviceHolders
		log.Error().Int("holders", len(hs)).Msg("--device-holders=fail: exiting 73")
	}
	return check
}

// watchMemory returns a channel that delivers when available memory falls
// below --mem-floor (nil: no floor).
func (h *holdRun) watchMemory(ctx context.Context) <-chan memfloor.Low {
	ch, err := memfloor.Watch(ctx, h.o.MemFloor, h.memSource)
	if err != nil {
		h.o.Log.Warn().Err(err).Msg("memory floor not watched")
	}
	return ch
}

// writeMetrics adds this hold to the resource's metrics (--metrics-dir).
func (h *holdRun) writeMetrics(granted, ended time.Time) {
	if h.o.MetricsDir == "" {
		return
	}
	m := metrics.Hold{
		Granted: !granted.IsZero(), Cause: string(h.res.Cause), Survivors: len(h.res.Teardown.Survivors),
		DeviceHolders: h.deviceHolders, LostEvents: h.lost, End: ended,
	}
	if !granted.IsZero() {
		m.Wait, m.Hold = granted.Sub(h.queued), ended.Sub(granted)
	} else if !h.queued.IsZero() {
		m.Wait = ended.Sub(h.queued)
	}
	for _, res := range append([]string{h.o.Resource}, h.poolMetricNames()...) {
		if err := metrics.Record(h.o.MetricsDir, res, m); err != nil {
			h.o.Log.Warn().Err(err).Str("metrics_dir", h.o.MetricsDir).Msg("cannot write metrics")
		}
	}
}
