// status_test.go owns the tests of the waiting line: the holder it names
// cannot drive the terminal, and a locker with no ticket is named.
package hold

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/proc"
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

// A process that holds the token with no ticket is named on the waiting
// line by pid, user and command; its command is its own text, shown with
// its control characters escaped.
func TestStatusLineNamesLocker(t *testing.T) {
	var b bytes.Buffer
	s := &statusLine{w: &b, stop: make(chan struct{})}
	lk := &queue.Locker{Lock: "token", Process: proc.Ident{PID: 4242, Start: 7}, UID: 0, Comm: "flock",
		Cmd: []string{"flock", "token", "x\x1b[2J"}, Started: time.Now(), Seen: time.Now()}
	s.update(queue.Position{Locker: lk})
	out := strings.TrimPrefix(b.String(), "\r\x1b[K")
	if strings.ContainsAny(out, "\x1b") || !strings.Contains(out, "token locked by pid 4242 (root: flock token x\\x1b[2J) with no ticket, seen since ") {
		t.Errorf("waiting line %q, want the locker named", out)
	}
}

// A holder that keeps the token after its payload ended is shown on the
// waiting line with what it keeps it for: the node, and the pid, user
// and command of the process outside its lineage that holds it, escaped.
func TestStatusLineNamesKeeping(t *testing.T) {
	var b bytes.Buffer
	s := &statusLine{w: &b, stop: make(chan struct{})}
	k := &queue.Keeping{Since: time.Now(), Holders: []queue.KeptNode{{Node: "/dev/nvidia0", PID: 4242, UID: 1000, User: "bob", Command: "python\x1b[2J train.py"}}}
	s.update(queue.Position{Holder: &queue.Ticket{Label: "job", Granted: time.Now(), Keeping: k}})
	out := strings.TrimPrefix(b.String(), "\r\x1b[K")
	if strings.ContainsAny(out, "\x1b") || !strings.Contains(out, "; the holder keeps the token while /dev/nvidia0 is held by pid 4242 (bob: python\\x1b[2J train.py)") {
		t.Errorf("waiting line %q, want what the holder keeps the token for", out)
	}
}
