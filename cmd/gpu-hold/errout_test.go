// errout_test.go owns the tests of the final error's form: a plain line, a
// JSON line under --log-format json (even when a flag error stopped
// parsing before it), and GitHub Actions annotations; and that another
// user's text (a label, a planted file's name) reaches it escaped.
package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/gpu-hold/gpu-hold/internal/fleetenv"
)

func TestJSONLogArg(t *testing.T) {
	for _, c := range []struct {
		args string
		want bool
	}{
		{"--log-format json -- true", true},
		{"--log-format=json -t soon -- true", true},
		{"-t soon --log-format json", true},
		{"--log-format console -- true", false},
		{"-- gpu-hold --log-format json", false}, // the payload's own flag
		{"queue", false},
	} {
		if got := jsonLogArg(strings.Fields(c.args)); got != c.want {
			t.Errorf("jsonLogArg(%s) = %v, want %v", c.args, got, c.want)
		}
	}
}

// Under --log-format json, every line of stderr is JSON, the final error
// too, with its exit code.
func TestFinalErrorJSON(t *testing.T) {
	for _, args := range [][]string{
		{"--log-format", "json", "-t", "soon", "--", "true"}, // cobra's flag error
		{"--log-format", "json", "--bogus", "--", "true"},
		{"--log-format", "json", "cancel", "banana"}, // a command's own usage error
		{"--log-format", "json", "cancel", "<&>"},
	} {
		var b bytes.Buffer
		root := newRootCmd(&globalOpts{})
		root.SetArgs(append([]string{"--dir=" + t.TempDir()}, args...))
		code := exitCodeTo(root.Execute(), errOut{w: &b, json: jsonLogArg(args)})
		var m map[string]any
		if strings.Count(b.String(), "\n") != 1 || json.Unmarshal(b.Bytes(), &m) != nil {
			t.Fatalf("%q: stderr is not one JSON line:\n%s", args, b.String())
		}
		if m["level"] != "error" || m["exit_code"] != float64(code) || code != 125 || m["message"] == "" {
			t.Errorf("%q: exit %d, line %v", args, code, m)
		}
		if strings.Contains(b.String(), `\u00`) {
			t.Errorf("%q: HTML-escaped: %s", args, b.String())
		}
	}
}

func TestGitHubAnnotations(t *testing.T) {
	var b bytes.Buffer
	exitCodeTo(usageErr("100%% bad\nsecond"), errOut{w: &b, github: true})
	if want := "gpu-hold: 100% bad\nsecond\n::error::gpu-hold: 100%25 bad%0Asecond\n"; b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
	b.Reset()
	log := zerolog.New(&bytes.Buffer{}).Hook(githubHook(&b))
	log.Info().Msg("token taken")
	log.Warn().Msg("cannot pin the lineage")
	log.Error().Msg("survivor")
	if want := "::warning::gpu-hold: cannot pin the lineage\n::error::gpu-hold: survivor\n"; b.String() != want {
		t.Errorf("log annotations %q, want %q", b.String(), want)
	}
}

// The final error may quote another user's ticket (its label): its
// control characters are shown, never acted on, its lines kept.
func TestFinalErrorShowsNoControlCharacters(t *testing.T) {
	var b bytes.Buffer
	exitCodeTo(usageErr("held by x\x1b]0;PWNED\x07\x1b[2J\u009b31m\nsecond"), errOut{w: &b, github: true})
	if out := b.String(); strings.ContainsAny(out, "\x1b\x07\u009b") || !strings.Contains(out, "\nsecond\n") {
		t.Errorf("control characters reach the terminal: %q", out)
	}
}

// A planted file's name reaches root's terminal through `gpu-hold queue`
// (the files skipped) and `gpu-hold doctor` (a problem's path).
func TestPlantedNamesShowNoControlCharacters(t *testing.T) {
	const name = "t.1\x1b]0;PWNED\x07\x1b[2J"
	var b bytes.Buffer
	printQueue(&b, []resourceView{{Resource: "gpu", Skipped: []string{name}}}, nil, true)
	b.WriteString(queueDirText(fleetenv.DirReport{Path: "/q", Fleet: true, Group: "g", Problems: []fleetenv.DirProblem{{Path: "/q/gpu/" + name, Problem: "a FIFO"}}}))
	if out := b.String(); strings.ContainsAny(out, "\x1b\x07") || !strings.Contains(out, "t.1") {
		t.Errorf("a planted name's control characters reach the terminal: %q", out)
	}
}
