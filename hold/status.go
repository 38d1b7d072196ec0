// status.go owns the live one-line queue status shown on a terminal while a
// ticket waits: position, holder's label and how long it has held, and a
// process that holds the queue's locks with no ticket that explains it,
// and what a holder keeps the token for after its payload ended.
package hold

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/termsafe"
	"github.com/gpu-hold/gpu-hold/queue"
)

type statusLine struct {
	mu   sync.Mutex
	w    io.Writer
	last queue.Position
	stop chan struct{}
}

// newStatusLine returns a status line on w; with w nil it does nothing.
func newStatusLine(w io.Writer) *statusLine {
	s := &statusLine{w: w, stop: make(chan struct{})}
	if w != nil {
		// The holder's age changes every second: redraw on a display tick.
		go func() {
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for {
				select {
				case <-s.stop:
					return
				case <-t.C:
					s.draw()
				}
			}
		}()
	}
	return s
}

func (s *statusLine) update(p queue.Position) {
	s.mu.Lock()
	s.last = p
	s.mu.Unlock()
	s.draw()
}

func (s *statusLine) draw() {
	if s.w == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	line := fmt.Sprintf("waiting: %d ahead", s.last.Ahead)
	if hd := s.last.Holder; hd != nil {
		label := termsafe.Text(hd.Label)
		if label == "" {
			label = "(no label)"
		}
		line += fmt.Sprintf(", held by %s (pid %d) for %s", label, hd.Holder.PID, time.Since(hd.Granted).Round(time.Second))
		if k := hd.Keeping; k != nil {
			// Its payload ended; a process outside its lineage holds the device.
			line += "; " + k.Line()
		}
	}
	if s.last.Waiting != "" {
		line += "; " + s.last.Waiting
	}
	if lk := s.last.Locker; lk != nil {
		// Who holds the token up where no gpu-hold holder explains it.
		line += "; " + lk.Summary()
	}
	fmt.Fprintf(s.w, "\r\033[K%s", line)
}

func (s *statusLine) clear() {
	close(s.stop)
	if s.w != nil {
		s.mu.Lock()
		fmt.Fprint(s.w, "\r\033[K")
		s.mu.Unlock()
	}
}
