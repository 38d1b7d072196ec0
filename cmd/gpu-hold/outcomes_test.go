// outcomes_test.go owns the check that the man page and the docs give every
// outcome of the one table (record.Outcomes): its exit code and its cause.
package main

import (
	"os"
	"strings"
	"testing"

	"github.com/gpu-hold/gpu-hold/internal/record"
)

func TestManPageHasEveryOutcome(t *testing.T) {
	text := exitStatusText()
	for _, o := range record.Outcomes {
		if !strings.Contains(text, codeText(o.Code)) || !strings.Contains(text, string(o.Cause)) || !strings.Contains(text, o.Meaning) {
			t.Errorf("the man page's EXIT STATUS lacks %s (%s): %s", codeText(o.Code), o.Cause, o.Meaning)
		}
	}
}

// TestDocsHaveEveryOutcome: the README's exit codes give every code, and
// the record's format page every cause.
func TestDocsHaveEveryOutcome(t *testing.T) {
	codes := section(t, "../../README.md", "## Exit codes")
	causes := section(t, "../../docs/RECORD.md", "")
	for _, o := range record.Outcomes {
		if !strings.Contains(codes, codeText(o.Code)) {
			t.Errorf("README.md's Exit codes lack %s (%s): add its row from record.Outcomes", codeText(o.Code), o.Meaning)
		}
		if !strings.Contains(causes, "`"+string(o.Cause)+"`") {
			t.Errorf("docs/RECORD.md does not name the cause `%s` (%s): add it from record.Outcomes", o.Cause, o.Meaning)
		}
	}
}

// section returns the text of file from the heading to the next heading of
// its level ("" heading: the whole file).
func section(t *testing.T, file, heading string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	if heading == "" {
		return s
	}
	i := strings.Index(s, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("%s has no heading %q", file, heading)
	}
	s = s[i+len(heading)+2:]
	level := heading[:strings.Index(heading, " ")+1]
	if j := strings.Index(s, "\n"+level); j >= 0 {
		s = s[:j]
	}
	return s
}
