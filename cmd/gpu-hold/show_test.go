// show_test.go owns the tests of gpu-hold show on a record without its end
// line: running while its holder is alive (by identity), died otherwise;
// and the JSON form writes & as &.
package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/record"
)

// openRecord writes a record whose end line is not written yet, held by
// holder, whose payload runs `bash -c 'a && b'`.
func openRecord(t *testing.T, holder proc.Ident) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hold.jsonl")
	now := time.Now()
	w, err := record.CreateRecord(path, record.HoldInfo{ID: "h1", Resource: "gpu", Label: "l", Holder: holder, Cmd: []string{"bash", "-c", "a && b"}})
	if err != nil {
		t.Fatal(err)
	}
	root := proc.Ident{PID: 4242, Start: 77}
	w.Event(record.Event{Kind: record.Fork, Time: now, Ident: root, PPID: holder.PID})
	w.Event(record.Event{Kind: record.Exec, Time: now, Ident: root, Filename: "/bin/bash", Argv: []string{"bash", "-c", "a && b"}})
	w.Flush()
	t.Cleanup(func() { w.Close() })
	return path
}

func TestShowRunningHold(t *testing.T) {
	self, err := proc.Self()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		holder proc.Ident
		want   []string
		not    []string
	}{
		{"alive", self, []string{"running (its gpu-hold, pid", "the lineage so far", "running", "running (no exit seen yet): 4242@77"},
			[]string{"died before its end line", "unknown"}},
		// The same pid with another start time is not the holder.
		{"pid reused", proc.Ident{PID: self.PID, Start: self.Start + 1}, []string{"the holder died before its end line", "alive when the record stops"},
			[]string{"running"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, stderr, _ := cli(t, "show", "--color=never", openRecord(t, c.holder))
			if code != 0 {
				t.Fatalf("show: exit %d\n%s", code, stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("show lacks %q:\n%s", w, out)
				}
			}
			for _, w := range c.not {
				if strings.Contains(out, w) {
					t.Errorf("show says %q:\n%s", w, out)
				}
			}
		})
	}
}

func TestShowJSONNoHTMLEscape(t *testing.T) {
	self, _ := proc.Self()
	for _, format := range []string{"json", "timeline"} {
		code, out, stderr, _ := cli(t, "show", "--format", format, openRecord(t, self))
		if code != 0 || strings.Contains(out, `\u0026`) || !strings.Contains(out, "a && b") {
			t.Errorf("show --format %s: exit %d, want a && b unescaped:\n%s%s", format, code, out, stderr)
		}
		if format == "json" {
			var doc struct{ Running bool }
			if json.Unmarshal([]byte(out), &doc) != nil || !doc.Running {
				t.Errorf("show --format json: running not set:\n%s", out)
			}
		}
	}
}
