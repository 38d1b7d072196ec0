// status_test.go owns the test of the waiting line: the holder it names
// cannot drive the terminal.
package hold

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/queue"
)

// The waiting line names the holder by its label, another user's text:
// only the line's own erase reaches the terminal.
func TestStatusLineShowsNoControlCharacters(t *testing.T) {
	var b bytes.Buffer
	s := &statusLine{w: &b, stop: make(chan struct{})}
	s.update(queue.Position{Ahead: 1, Holder: &queue.Ticket{Label: "x\x1b]0;PWNED\x07\x1b[2J\u009b31m", Granted: time.Now()}})
	out := strings.TrimPrefix(b.String(), "\r\x1b[K")
	if strings.ContainsAny(out, "\x1b\x07\u009b") || !strings.Contains(out, "held by x") {
		t.Errorf("control characters of the holder's label reach the terminal: %q", b.String())
	}
}
