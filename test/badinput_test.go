// badinput_test.go owns the bad-input tests of issue #2: every mistake on
// the command line gets one clear line on stderr and exit 125 (126/127 for
// a payload that cannot be executed / is not found), the payload does not
// run, and nothing is left behind in the queue dir.
package test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runRaw runs binPath with exactly args (no --dir or --log-format added),
// as cred when set, with mark and GH_T=scratch in its environment.
func runRaw(t *testing.T, binPath string, cred *syscall.Credential, mark, scratch string, args ...string) result {
	t.Helper()
	h := &hold{t: t, Mark: mark, Args: args}
	h.Cmd = exec.Command(binPath, args...)
	h.Cmd.Env = append(os.Environ(), markEnv+"="+mark, "GH_T="+scratch)
	h.Cmd.Stdout, h.Cmd.Stderr = &h.out, &h.err
	h.Cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cred}
	h.Cmd.WaitDelay = waitDelay
	h.t0 = time.Now()
	if err := h.Cmd.Start(); err != nil {
		t.Fatalf("starting gpu-hold: %v", err)
	}
	return h.Wait(20 * time.Second)
}

// requireOneLineError checks the exit code and that stderr is exactly one
// line naming what was wrong (mention, a regexp).
func requireOneLineError(t *testing.T, r result, code int, mention string) {
	t.Helper()
	if r.Code != code {
		t.Errorf("gpu-hold exited %d, want %d\nstderr:\n%s", r.Code, code, r.Stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.Stderr), "\n")
	if len(lines) != 1 || lines[0] == "" {
		t.Errorf("want exactly one line on stderr, got %d:\n%s", len(lines), r.Stderr)
	}
	if !regexp.MustCompile(mention).MatchString(r.Stderr) {
		t.Errorf("the error does not name what was wrong (want it to match %q):\n%s", mention, r.Stderr)
	}
}

// requireEmpty checks that dir has no entries: no ticket, lock or record.
func requireEmpty(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Errorf("reading queue dir: %v", err)
		return
	}
	if len(ents) > 0 {
		var names []string
		filepath.WalkDir(dir, func(p string, _ os.DirEntry, _ error) error {
			names = append(names, strings.TrimPrefix(p, dir))
			return nil
		})
		t.Errorf("bad input left things in the queue dir: %v", names)
	}
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	// ran is a payload that leaves a file behind when it runs.
	ran := []string{"bash", "-c", `touch "$GH_T/ran"`}
	cases := []struct {
		name    string
		args    func(q, s string) []string // after --dir q
		code    int
		mention func(q, s string) string
	}{
		{"no-dashdash", func(q, s string) []string { return ran }, 125, lit(`-- `)},
		{"no-command", func(q, s string) []string { return []string{"--"} }, 125, lit("command")},
		{"no-args", func(q, s string) []string { return nil }, 125, lit("command")},
		{"flag-after-dashdash-only", func(q, s string) []string { return []string{"-t", "1s", "--"} }, 125, lit("command")},
		{"unknown-flag", func(q, s string) []string { return append([]string{"--bogus-flag", "--"}, ran...) }, 125, lit("--bogus-flag")},
		{"unknown-shorthand", func(q, s string) []string { return append([]string{"-Z", "--"}, ran...) }, 125, lit("-Z")},
		{"negative-max-hold", func(q, s string) []string { return append([]string{"--max-hold=-1s", "--"}, ran...) }, 125, lit("max-hold")},
		{"negative-t", func(q, s string) []string { return append([]string{"-t", "-1s", "--"}, ran...) }, 125, re(`max-hold|-1s`)},
		{"negative-wait", func(q, s string) []string { return append([]string{"--wait=-5s", "--"}, ran...) }, 125, lit("wait")},
		{"negative-grace", func(q, s string) []string { return append([]string{"-g=-1s", "--"}, ran...) }, 125, lit("grace")},
		{"negative-survivor-wait", func(q, s string) []string { return append([]string{"--survivor-wait=-2s", "--"}, ran...) }, 125, lit("survivor-wait")},
		{"unparsable-max-hold", func(q, s string) []string { return append([]string{"-t", "soon", "--"}, ran...) }, 125, lit("soon")},
		{"unparsable-grace", func(q, s string) []string { return append([]string{"--grace=10q", "--"}, ran...) }, 125, lit("10q")},
		{"bad-track", func(q, s string) []string { return append([]string{"--track=strace", "--"}, ran...) }, 125, lit("strace")},
		{"not-found", func(q, s string) []string { return []string{"--", "gpu-hold-no-such-command-x7", "arg"} }, 127, lit("gpu-hold-no-such-command-x7")},
		{"not-found-path", func(q, s string) []string { return []string{"--", s + "/missing/cmd"} }, 127, func(q, s string) string { return regexp.QuoteMeta(s + "/missing/cmd") }},
		{"not-executable", func(q, s string) []string { return []string{"--", s + "/notexec"} }, 126, func(q, s string) string { return regexp.QuoteMeta(s + "/notexec") }},
		{"directory", func(q, s string) []string { return []string{"--", s} }, 126, func(q, s string) string { return regexp.QuoteMeta(s) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			mark := newMark(t)
			q, s := t.TempDir(), t.TempDir()
			if err := os.WriteFile(filepath.Join(s, "notexec"), []byte("#!/bin/sh\ntouch \"$GH_T/ran\"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			r := runRaw(t, bin, nil, mark, s, append([]string{"--dir", q}, c.args(q, s)...)...)
			requireOneLineError(t, r, c.code, c.mention(q, s))
			if exists(filepath.Join(s, "ran")) {
				t.Errorf("the payload ran")
			}
			requireEmpty(t, q)
			requireNoneLeft(t, mark)
		})
	}
}

// lit returns a mention function matching s literally.
func lit(s string) func(q, s string) string {
	re := regexp.QuoteMeta(s)
	return func(string, string) string { return re }
}

// TestBadInputDir: --dir that is a file, that does not exist, or that the
// user cannot write: exit 125 with one line naming the dir; the payload does
// not run and nothing is created.
func TestBadInputDir(t *testing.T) {
	t.Parallel()
	ran := []string{"bash", "-c", `touch "$GH_T/ran"`}
	t.Run("is-a-file", func(t *testing.T) {
		t.Parallel()
		mark := newMark(t)
		s := t.TempDir()
		f := filepath.Join(s, "queue")
		if err := os.WriteFile(f, []byte("not a dir\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		r := runRaw(t, bin, nil, mark, s, append([]string{"--dir", f, "--"}, ran...)...)
		requireOneLineError(t, r, 125, regexp.QuoteMeta(f))
		if b, err := os.ReadFile(f); err != nil || !bytes.Equal(b, []byte("not a dir\n")) {
			t.Errorf("the file given as --dir was changed: %q %v", b, err)
		}
		if exists(filepath.Join(s, "ran")) {
			t.Errorf("the payload ran")
		}
	})
	t.Run("missing", func(t *testing.T) {
		t.Parallel()
		mark := newMark(t)
		s := t.TempDir()
		q := filepath.Join(s, "no", "such", "dir")
		r := runRaw(t, bin, nil, mark, s, append([]string{"--dir", q, "--"}, ran...)...)
		requireOneLineError(t, r, 125, regexp.QuoteMeta(q))
		if exists(filepath.Join(s, "no")) {
			t.Errorf("a missing --dir was created")
		}
		if exists(filepath.Join(s, "ran")) {
			t.Errorf("the payload ran")
		}
	})
	t.Run("not-writable", func(t *testing.T) {
		rg := unprivileged(t)
		t.Parallel()
		mark := newMark(t)
		s := openDir(t)
		q := openDir(t)
		if err := os.Chmod(q, 0o755); err != nil { // owned by root: uid 65534 may read, not write
			t.Fatal(err)
		}
		r := runRaw(t, rg.Bin, rg.Cred, mark, s, append([]string{"--dir", q, "--"}, ran...)...)
		requireOneLineError(t, r, 125, regexp.QuoteMeta(q)+`.*(writ|permi)`)
		if exists(filepath.Join(s, "ran")) {
			t.Errorf("the payload ran")
		}
		requireEmpty(t, q)
	})
}

// re returns a mention function matching the regexp s.
func re(s string) func(q, s string) string {
	return func(string, string) string { return s }
}
