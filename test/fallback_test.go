// fallback_test.go owns the backend-choice test of issue #4: run as an
// unprivileged user, --track=auto falls back to procfs with a one-line
// notice that says why and the procfs routes still pass; --track=bpf, and
// a bare --track, refuse with a clear error and exit 125.
package test

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestFallbackUnprivileged(t *testing.T) {
	rg := unprivileged(t)
	t.Parallel()

	t.Run("notice", func(t *testing.T) {
		t.Parallel()
		mark := newMark(t)
		d, q := rg.dirs(t)
		r := rg.start(t, q, mark, d, "--", "true").Wait(20 * time.Second)
		requireEnd(t, r, 0, false)
		notice := regexp.MustCompile(`(?i)bpf`)
		why := regexp.MustCompile(`(?i)permi|root|capab|privileg|not allowed|refused|EPERM|CAP_`)
		var found []string
		for _, l := range strings.Split(r.Stderr, "\n") {
			if notice.MatchString(l) && strings.Contains(strings.ToLower(l), "proc") {
				found = append(found, l)
			}
		}
		if len(found) != 1 {
			t.Errorf("want one line noticing the fallback from eBPF to procfs, got %d\nstderr:\n%s", len(found), r.Stderr)
		} else if !why.MatchString(found[0]) {
			t.Errorf("the fallback notice does not say why eBPF was not used: %s", found[0])
		}
		if be := startedBackend(r.Stderr); be != "proc" {
			t.Errorf("\"payload started\" names backend %q, want proc\nstderr:\n%s", be, r.Stderr)
		}
		requireNoneLeft(t, mark)
	})
	t.Run("E1", func(t *testing.T) { t.Parallel(); routeE1(t, rg) })
	t.Run("E3", func(t *testing.T) { t.Parallel(); routeE3(t, rg) })

	// --track=bpf and a bare --track: eBPF or a clear error, never a
	// silent fallback; the payload does not run and no ticket is left.
	for _, form := range [][]string{{"--track=bpf"}, {"--track", "bpf"}, {"--track"}} {
		t.Run("refused"+strings.Join(form, "_"), func(t *testing.T) {
			t.Parallel()
			mark := newMark(t)
			d, q := rg.dirs(t)
			rb := rg
			rb.Track = form
			r := rb.start(t, q, mark, d, "--", "bash", "-c", `touch "$GH_T/ran"`).Wait(20 * time.Second)
			if r.Code != 125 {
				t.Errorf("gpu-hold %v exited %d, want 125\nstderr:\n%s", form, r.Code, r.Stderr)
			}
			if !regexp.MustCompile(`(?i)bpf`).MatchString(r.Stderr) {
				t.Errorf("the error does not say eBPF is unavailable:\n%s", r.Stderr)
			}
			if exists(filepath.Join(d, "ran")) {
				t.Errorf("the payload ran without the eBPF tracker")
			}
			requireEmpty(t, q)
			requireNoneLeft(t, mark)
		})
	}
}

// startedBackend returns the "backend" field of the "payload started" line.
func startedBackend(stderr string) string {
	for _, l := range strings.Split(stderr, "\n") {
		var e struct {
			Msg     string `json:"msg"`
			Message string `json:"message"`
			Backend string `json:"backend"`
		}
		if json.Unmarshal([]byte(l), &e) == nil && (e.Msg == "payload started" || e.Message == "payload started") {
			return e.Backend
		}
	}
	return ""
}
