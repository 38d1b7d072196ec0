// log_test.go owns the tests of the logger's durations: whole milliseconds
// under keys ending in _ms, in JSON and console alike, and no .Dur call in
// the tree under a key without its unit.
package fleetenv

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestLogDurationsHaveUnits(t *testing.T) {
	for _, format := range []string{"json", "console"} {
		var b bytes.Buffer
		log, err := NewLogger(&b, format)
		if err != nil {
			t.Fatal(err)
		}
		log.Info().Dur("teardown_ms", 6018516683*time.Nanosecond).Msg("hold ended")
		line := b.String()
		if format == "json" {
			var m map[string]any
			if err := json.Unmarshal(b.Bytes(), &m); err != nil || m["teardown_ms"] != float64(6018) {
				t.Errorf("json: %q (%v), want teardown_ms 6018", line, err)
			}
		} else if !strings.Contains(line, "teardown_ms=6018") || strings.Contains(line, "6018.") {
			t.Errorf("console: %q, want teardown_ms=6018", line)
		}
	}
}

// TestDurationKeysHaveUnits: every .Dur( in the module's code names its unit
// in its key (a bare "teardown=6018" reads as seconds).
func TestDurationKeysHaveUnits(t *testing.T) {
	dur := regexp.MustCompile(`\.\s*Dur\("([^"]*)"`)
	found := 0
	err := filepath.WalkDir("../..", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range dur.FindAllStringSubmatch(string(src), -1) {
			found++
			if !strings.HasSuffix(m[1], "_ms") {
				t.Errorf("%s: .Dur(%q): name the unit, e.g. %q", p, m[1], m[1]+"_ms")
			}
		}
		return nil
	})
	if err != nil || found == 0 {
		t.Fatalf("walking the module: %v (found %d .Dur calls)", err, found)
	}
}

// A message on the console may quote another user's text (a label): its
// control characters are shown, never acted on; so are a field's.
func TestConsoleLogShowsNoControlCharacters(t *testing.T) {
	const esc = "\x1b]0;PWNED\x07\x1b[2J\u009b31m"
	var b bytes.Buffer
	log, err := NewLogger(&b, "console")
	if err != nil {
		t.Fatal(err)
	}
	log.Warn().Str("label", esc).Err(errors.New(esc)).Msg("held by " + esc)
	if out := b.String(); strings.ContainsAny(out, "\x1b\x07\u009b") || !strings.Contains(out, "held by") {
		t.Errorf("control characters reach the terminal: %q", out)
	}
}
