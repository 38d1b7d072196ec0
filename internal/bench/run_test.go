package main

import (
	"strings"
	"testing"
	"time"
)

// A failed run's description carries what the command wrote on stderr, and
// gpu-hold's JSON lines are parsed into log lines, not kept as text.
func TestChildStderr(t *testing.T) {
	b := &bench{}
	p, err := b.startProc([]string{"sh", "-c", `echo '{"prog":"gpu-hold","level":"warn","message":"m1","time":"2026-01-02T03:04:05.123456789Z"}' >&2; echo plain text >&2; exit 3`}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.wait(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	l, ok := p.waitLine("m1", 5*time.Second)
	if !ok || l.Time.Nanosecond() != 123456789 {
		t.Fatalf("log line m1 not parsed: %+v %v", l, ok)
	}
	if d := p.describe(); p.code() != 3 || !strings.Contains(d, "plain text") || !strings.Contains(d, "warn: m1") {
		t.Fatalf("describe = %q (code %d)", d, p.code())
	}
}
