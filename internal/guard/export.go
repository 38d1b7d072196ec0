// export.go owns the guard's metrics: gpu_hold_guard.prom in the metrics
// dir (node_exporter's textfile collector), rendered with expfmt and
// replaced whole after every scan. The fleet metric is
// gpu_hold_guard_untokened_device_seconds_total: device-seconds held
// without the token, per resource and user.
package guard

import (
	"bytes"
	"sort"
	"strconv"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/proto"

	"github.com/gpu-hold/gpu-hold/internal/metrics"
)

// TextfileName is the guard's textfile in the metrics dir.
const TextfileName = "gpu_hold_guard.prom"

// stats are the guard's counters since it started.
type stats struct {
	scans     uint64
	lastScan  time.Time
	scanTook  time.Duration
	untokened map[[2]string]float64 // resource, user -> device-seconds
	ended     map[[2]string]float64 // resource, signal -> count
	allowed   map[string]int        // resource -> allow-listed holders in the last scan
}

// export writes the textfile, when there is a metrics dir.
func (g *Guard) export() {
	if g.o.MetricsDir == "" {
		return
	}
	var buf bytes.Buffer
	for _, mf := range g.families() {
		if len(mf.Metric) == 0 {
			continue // expfmt refuses a family without samples
		}
		if _, err := expfmt.MetricFamilyToText(&buf, mf); err != nil {
			g.o.Log.Error().Err(err).Msg("cannot render the guard's metrics")
			return
		}
	}
	if err := metrics.WriteTextfile(g.o.MetricsDir, TextfileName, buf.Bytes()); err != nil {
		g.o.Log.Error().Err(err).Msg("cannot write the guard's metrics; the guard goes on")
	}
}

// families is the metrics now.
func (g *Guard) families() []*dto.MetricFamily {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now()
	scans := family("gpu_hold_guard_scans_total", "Scans of the device holders since the guard started.", dto.MetricType_COUNTER)
	scans.Metric = append(scans.Metric, counter(float64(g.stats.scans)))
	took := family("gpu_hold_guard_scan_seconds", "How long the last scan took.", dto.MetricType_GAUGE)
	took.Metric = append(took.Metric, gauge(g.stats.scanTook.Seconds()))
	last := family("gpu_hold_guard_last_scan_timestamp_seconds", "When the last scan ran.", dto.MetricType_GAUGE)
	last.Metric = append(last.Metric, gauge(float64(g.stats.lastScan.UnixNano())/1e9))
	count := family("gpu_hold_guard_intruders", "Processes holding the resource's device without the token, in the last scan.", dto.MetricType_GAUGE)
	allowed := family("gpu_hold_guard_allowed_holders", "Allow-listed processes holding the resource's device, in the last scan.", dto.MetricType_GAUGE)
	for _, r := range g.res {
		n := 0
		for k := range g.intruders {
			if k.resource == r.Name {
				n++
			}
		}
		count.Metric = append(count.Metric, gauge(float64(n), "resource", r.Name))
		allowed.Metric = append(allowed.Metric, gauge(float64(g.stats.allowed[r.Name]), "resource", r.Name))
	}
	held := family("gpu_hold_guard_intruder_seconds", "How long each intruder has been seen holding the device.", dto.MetricType_GAUGE)
	mem := family("gpu_hold_guard_intruder_drm_bytes", "An intruder's DRM memory, as the driver reports it in fdinfo (drm-memory-*, drm-total-*, drm-resident-*).", dto.MetricType_GAUGE)
	for _, in := range g.sortedIntruders() {
		labels := []string{"resource", in.Resource, "device", in.Node, "pid", strconv.Itoa(in.PID), "start", in.Ident.Started(g.bootWall).UTC().Format(time.RFC3339),
			"user", userOf(in.Holder), "command", in.Command}
		held.Metric = append(held.Metric, gauge(now.Sub(in.First).Seconds(), labels...))
		for _, kk := range sortedKeys(in.DRM) {
			mem.Metric = append(mem.Metric, gauge(float64(in.DRM[kk]), "resource", in.Resource, "pid", strconv.Itoa(in.PID), "key", kk))
		}
	}
	untok := family("gpu_hold_guard_untokened_device_seconds_total", "Device-seconds held without the token, per user (counted from one scan's sighting to the next).", dto.MetricType_COUNTER)
	for _, k := range sortedPairs(g.stats.untokened) {
		untok.Metric = append(untok.Metric, counter(g.stats.untokened[k], "resource", k[0], "user", k[1]))
	}
	ended := family("gpu_hold_guard_signals_total", "Signals the guard sent to intruders (--enforce).", dto.MetricType_COUNTER)
	for _, k := range sortedPairs(g.stats.ended) {
		ended.Metric = append(ended.Metric, counter(g.stats.ended[k], "resource", k[0], "signal", k[1]))
	}
	denied := family("gpu_hold_guard_denied_opens_total", "Opens of a guarded device the filter refused (--deny-at-open), all resources.", dto.MetricType_COUNTER)
	if g.kern != nil {
		if n, err := g.kern.dg.Refused(); err == nil {
			denied.Metric = append(denied.Metric, counter(float64(n)))
		}
	}
	return []*dto.MetricFamily{scans, took, last, count, allowed, held, mem, untok, ended, denied}
}

// sortedIntruders lists the intruders by resource and pid (g.mu held).
func (g *Guard) sortedIntruders() []*intruder {
	out := make([]*intruder, 0, len(g.intruders))
	for _, in := range g.intruders {
		out = append(out, in)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Resource != out[j].Resource {
			return out[i].Resource < out[j].Resource
		}
		return out[i].PID < out[j].PID
	})
	return out
}

func family(name, help string, t dto.MetricType) *dto.MetricFamily {
	return &dto.MetricFamily{Name: proto.String(name), Help: proto.String(help), Type: t.Enum()}
}

func labelPairs(kv []string) []*dto.LabelPair {
	var out []*dto.LabelPair
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, &dto.LabelPair{Name: proto.String(kv[i]), Value: proto.String(kv[i+1])})
	}
	return out
}

func gauge(v float64, kv ...string) *dto.Metric {
	return &dto.Metric{Label: labelPairs(kv), Gauge: &dto.Gauge{Value: proto.Float64(v)}}
}

func counter(v float64, kv ...string) *dto.Metric {
	return &dto.Metric{Label: labelPairs(kv), Counter: &dto.Counter{Value: proto.Float64(v)}}
}

func sortedKeys(m map[string]uint64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sortedPairs(m map[[2]string]float64) [][2]string {
	out := make([][2]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i][0] != out[j][0] {
			return out[i][0] < out[j][0]
		}
		return out[i][1] < out[j][1]
	})
	return out
}
