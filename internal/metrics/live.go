// live.go owns a resource's live gauges, gpu_hold_<resource>.live.prom:
// whether the token is held, since when, and how many tickets wait, as
// the holder sees them. The holder rewrites the file while it holds (and
// once more, as free, just before it releases) with the same atomic
// replace as the counters, and without their lock: the token orders its
// holders' writes, and no stranger holding a lock can keep the last one,
// and so the release, waiting.
package metrics

import (
	"fmt"
	"path/filepath"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/gpu-hold/gpu-hold/internal/safefs"
)

// Live is a resource's state now.
type Live struct {
	Held        bool
	Since       time.Time // when the holder took the token (zero when free)
	QueueLength int       // tickets waiting
	Updated     time.Time // when this was seen; zero means now
}

// LiveFile is the live gauges' path for resource in dir. The "." keeps it
// apart from every resource's counters file (fileSafe never makes one).
func LiveFile(dir, resource string) string {
	return filepath.Join(dir, "gpu_hold_"+fileSafe(resource)+".live.prom")
}

// WriteLive rewrites resource's live gauges in dir.
func WriteLive(dir, resource string, l Live) error {
	if dir == "" {
		return nil
	}
	d, err := safefs.OpenUserDir(dir, 0)
	if err != nil {
		return fmt.Errorf("metrics dir %s: %v: create it or fix --metrics-dir", dir, err)
	}
	defer d.Close()
	prom, err := l.render(resource)
	if err != nil {
		return fmt.Errorf("encoding the live metrics of %s: %v", resource, err)
	}
	name := filepath.Base(LiveFile(dir, resource))
	replaced, err := replace(d, name, prom)
	if err != nil || replaced {
		return err
	}
	// A sticky dir, where another uid's file is rewritten in place: under
	// the lock, so that two writers never interleave, within a short
	// bound, since the last write comes before the release.
	unlock, err := lockMetrics(d, ".gpu_hold_"+fileSafe(resource), liveLockWait)
	if err != nil {
		return fmt.Errorf("%v; the live metrics are not written this time (a dir set up without the sticky bit needs no lock for them)", err)
	}
	defer unlock()
	return writeInPlace(d, name, prom)
}

func (l Live) render(resource string) ([]byte, error) {
	res := []string{"resource", resource}
	held, since := 0.0, 0.0
	if l.Held {
		held = 1
		since = unixSeconds(l.Since)
	}
	updated := l.Updated
	if updated.IsZero() {
		updated = time.Now()
	}
	gauge := func(name, help string, v float64) *family {
		return newFamily(name, help, dto.MetricType_GAUGE).add(v, res...)
	}
	return encode(
		gauge("gpu_hold_token_held", "1 while a hold holds the resource's token, 0 when it is free.", held),
		gauge("gpu_hold_holder_since_timestamp_seconds", "Unix time the current holder took the token (0: free).", since),
		gauge("gpu_hold_queue_length", "Tickets waiting for the token.", float64(l.QueueLength)),
		gauge("gpu_hold_live_updated_timestamp_seconds", "Unix time these live gauges were written (they go stale if the holder dies).", unixSeconds(updated)),
	)
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }
