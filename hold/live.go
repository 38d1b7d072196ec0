// live.go owns the live gauges of --metrics-dir while this hold holds the
// token: refreshed on a display tick with the queue's length, and written
// as free just before the release (so the next holder's "held" comes after).
package hold

import (
	"time"

	"github.com/gpu-hold/gpu-hold/internal/metrics"
	"github.com/gpu-hold/gpu-hold/queue"
)

// liveInterval is how often the holder rewrites its live gauges: the
// queue's length changes without telling the holder.
const liveInterval = 5 * time.Second

// liveMetrics starts refreshing the live gauges; the returned func stops it
// and writes the token as free. Without --metrics-dir it does nothing.
func (h *holdRun) liveMetrics() (stop func()) {
	o := &h.o
	if o.MetricsDir == "" {
		return func() {}
	}
	q, err := queue.OpenDir(o.Dir, o.Resource, queue.DirOptions{NoCreate: true, Warn: func(string) {}})
	waiting := func() int {
		if err != nil {
			return 0
		}
		st, serr := q.Status()
		if serr != nil {
			return 0
		}
		return len(st.Waiters)
	}
	write := func(l metrics.Live) {
		if werr := metrics.WriteLive(o.MetricsDir, o.Resource, l); werr != nil {
			o.Log.Warn().Err(werr).Msg("cannot write the live metrics")
		}
	}
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(liveInterval)
		defer t.Stop()
		for {
			write(metrics.Live{Held: true, Since: h.granted, QueueLength: waiting()})
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		close(done)
		<-finished
		write(metrics.Live{QueueLength: waiting()})
	}
}
