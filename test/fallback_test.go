// fallback_test.go owns the backend-choice test of issue #4: run as an
// unprivileged user, --track=auto falls back to procfs with a one-line
// notice that says why and the procfs routes still pass; --track=bpf, and
// a bare --track, refuse with a clear error and exit 125. The same holds in
// a pid namespace other than the host's, whose pids the programs do not see.
package test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/testenv"
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

// TestBPFRefusedInPidNamespace: a hold in a container's pid namespace cannot
// follow the host pids the BPF programs see. --track=bpf says so and exits
// 125 without running the payload; --track=auto says so once and runs it
// under procfs. (When gpu-hold, the namespace's init, exits, the kernel
// ends everything left in the namespace: nothing can outlive the test.)
func TestBPFRefusedInPidNamespace(t *testing.T) {
	testenv.NeedRoot(t, "unsharing a pid namespace")
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		testenv.Need(t, "unshare(1) (util-linux) is not installed")
	}
	t.Parallel()
	why := regexp.MustCompile(`pid namespace other than the host's`)
	for _, c := range []struct {
		track   string
		code    int
		backend string
	}{{"--track=bpf", 125, ""}, {"--track=auto", 0, "proc"}} {
		t.Run(c.track, func(t *testing.T) {
			t.Parallel()
			d, q := t.TempDir(), t.TempDir()
			cmd := exec.Command(unshare, "--pid", "--fork", "--mount-proc", "--",
				bin, "--dir", q, "--log-format", "json", c.track, "--", "touch", filepath.Join(d, "ran"))
			var stderr strings.Builder
			cmd.Env = append(os.Environ(), markEnv+"="+newMark(t))
			cmd.Stderr = &stderr
			err := cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != c.code {
				t.Errorf("%s in a pid namespace exited %d, want %d\nstderr:\n%s", c.track, code, c.code, stderr.String())
			}
			if n := len(why.FindAllString(stderr.String(), -1)); n == 0 {
				t.Errorf("%s in a pid namespace does not say why eBPF cannot be used:\n%s", c.track, stderr.String())
			}
			if be := startedBackend(stderr.String()); be != c.backend {
				t.Errorf("%s in a pid namespace started the payload under %q, want %q\nstderr:\n%s", c.track, be, c.backend, stderr.String())
			}
			if ran := exists(filepath.Join(d, "ran")); ran != (c.code == 0) {
				t.Errorf("%s in a pid namespace: payload ran = %v, want %v", c.track, ran, c.code == 0)
			}
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
