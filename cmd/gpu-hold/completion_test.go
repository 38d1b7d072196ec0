// completion_test.go owns the tests of --version, of shell completion
// (dynamic: resources, hold ids and tickets of the queue dir, flag values)
// and of the completion scripts cobra writes.
package main

import (
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/queue"
)

func TestVersion(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}, {Key: "vcs.time", Value: "2026-12-01T10:00:00Z"}}}
	if got, want := describeBuild(bi), "v1.2.3 (rev 0123456789ab dirty, 2026-12-01T10:00:00Z, go1.26.8)"; got != want {
		t.Errorf("describeBuild = %q, want %q", got, want)
	}
	code, out, _, _ := cli(t, "--version")
	if code != 0 || !strings.HasPrefix(out, "gpu-hold ") || !strings.Contains(out, "go1.") {
		t.Errorf("--version: exit %d, %q", code, out)
	}
}

func TestCompletion(t *testing.T) {
	dir := t.TempDir()
	q, err := queue.OpenDir(dir, "fpga", queue.DirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	self, _ := proc.Self()
	w, err := q.Enqueue(queue.Ticket{Resource: "fpga", Label: "bench", Holder: self, Created: time.Now(), HoldID: "20261201T223356-1f2e3d4c"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Cancel()
	pastRecord(t, dir, "fpga", "20261201T100000-00000009", "old", time.Now(), self, nil, "")
	for _, c := range []struct {
		args string
		want []string
	}{
		{"__complete -r ", []string{"fpga", "gpu", "npu"}},
		{"__complete --track= ", []string{"auto", "bpf", "proc"}},
		{"__complete --device-holders ", []string{"warn", "wait", "fail"}},
		{"__complete --log-format ", []string{"auto", "console", "json"}},
		{"__complete show --format ", []string{"tree", "json", "timeline"}},
		{"__complete wait ", []string{"20261201T223356-1f2e3d4c\tfpga waiting bench"}},
		{"__complete cancel -r fpga ", []string{"20261201T223356-1f2e3d4c\t", "1\tfpga waiting bench"}},
		{"__complete qu", []string{"queue"}},
		{"__complete show -r fpga ", []string{"20261201T100000-00000009"}},
	} {
		args := strings.Fields(c.args)
		if strings.HasSuffix(c.args, " ") || strings.HasSuffix(c.args, "=") {
			if strings.HasSuffix(c.args, "= ") {
				args[len(args)-1] = strings.TrimSuffix(args[len(args)-1], " ")
			} else {
				args = append(args, "")
			}
		}
		code, out, stderr, _ := cliIn(t, dir, args...)
		for _, w := range c.want {
			if code != 0 || !strings.Contains(out, w) {
				t.Errorf("%s: exit %d, want %q in\n%s%s", c.args, code, w, out, stderr)
			}
		}
	}
	for _, sh := range []string{"bash", "zsh", "fish"} {
		code, out, _, _ := cli(t, "completion", sh)
		if code != 0 || !strings.Contains(out, "gpu-hold") || len(out) < 1000 {
			t.Errorf("completion %s: exit %d, %d bytes", sh, code, len(out))
		}
	}
}

// The man page has every command, the exit codes and the files.
func TestManPage(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1796083200")
	code, out, stderr, _ := cli(t, "man")
	if code != 0 {
		t.Fatalf("man: exit %d\n%s", code, stderr)
	}
	for _, want := range []string{`.TH GPU-HOLD 1 "2026-12-01"`, ".SH SYNOPSIS", ".SS gpu\\-hold cancel", ".SS gpu\\-hold history", ".SS gpu\\-hold wait",
		".SH EXIT STATUS", "77    gpu\\-hold cancel ended the running hold", "/var/lib/gpu\\-hold/", "\\fB\\-t\\fR, \\fB\\-\\-max\\-hold\\fR DURATION"} {
		if !strings.Contains(out, want) {
			t.Errorf("man page lacks %q", want)
		}
	}
	if strings.Contains(out, ".SS gpu\\-hold man") {
		t.Error("the man page lists the hidden man command")
	}
}
