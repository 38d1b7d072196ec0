// record_read_test.go tests the reader on damaged records: a last line cut
// short is left out, damage anywhere else is an error naming the line, and
// nothing (fuzzed) makes it or the renderers panic.
package record

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// lineageBytes is the synthetic record's file content.
func lineageBytes(t testing.TB) []byte {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	writeLineage(t, path)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestReadTruncatedLastLine(t *testing.T) {
	full := lineageBytes(t)
	lines := bytes.SplitAfter(full, []byte("\n"))
	whole := len(lines) - 1 // SplitAfter leaves an empty last element
	// Cut in the middle of each of the last few lines in turn.
	for k := whole - 3; k < whole; k++ {
		prefix := bytes.Join(lines[:k], nil)
		cut := append(append([]byte{}, prefix...), lines[k][:len(lines[k])/2]...)
		rec, _, err := readRecord(bytes.NewReader(cut), "cut")
		if err != nil {
			t.Fatalf("cut in line %d: %v", k+1, err)
		}
		if !rec.Truncated || rec.Lines != k || rec.Ended {
			t.Fatalf("cut in line %d: truncated %v lines %d ended %v", k+1, rec.Truncated, rec.Lines, rec.Ended)
		}
	}
	rec, _, err := readRecord(bytes.NewReader(full), "full")
	if err != nil || rec.Truncated || rec.Lines != whole || !rec.Ended {
		t.Fatalf("whole record: %v truncated %v lines %d/%d", err, rec.Truncated, rec.Lines, whole)
	}
}

func TestReadDamageNamesLine(t *testing.T) {
	full := lineageBytes(t)
	lines := strings.SplitAfter(string(full), "\n")
	with := func(n int, repl string) string { // replace line n (1-based)
		l := append([]string{}, lines...)
		l[n-1] = repl
		return strings.Join(l, "")
	}
	cases := []struct {
		name, input string
		line        int
		says        string
	}{
		{"empty", "", 1, "empty"},
		{"header cut", `{"v":1,"type":"hold","ho`, 1, "header line is incomplete"},
		{"not a record", "hello\n", 1, "not a JSON object"},
		{"no header", `{"type":"event","kind":"fork","pid":1,"start":1}` + "\n", 1, "first line must be the hold header"},
		{"no version", `{"type":"hold","hold":{}}` + "\n", 1, `no format version`},
		{"newer version", `{"v":2,"type":"hold","hold":{}}` + "\n", 1, "newer than this gpu-hold reads"},
		{"garbage mid-record", with(5, "{\"type\":\"event\",\"kind\":\"fo\n"), 5, "not a JSON object"},
		{"cut mid-record", with(4, lines[3][:20]+"\n"), 4, "not a JSON object"},
		{"empty line", with(6, "\n"), 6, "empty"},
		{"unknown type", with(3, `{"type":"nonsense"}`+"\n"), 3, `unknown line type "nonsense"`},
		{"bad kind", with(3, `{"type":"event","kind":"spawn","pid":1,"start":1}`+"\n"), 3, `unknown event kind "spawn"`},
		{"bad pid", with(3, `{"type":"event","kind":"fork","pid":0,"start":1}`+"\n"), 3, "pid 0"},
		{"bad fate", with(3, `{"type":"fate","pid":5,"start":1,"fate":"vanished"}`+"\n"), 3, `unknown fate "vanished"`},
		{"wrong field type", with(3, `{"type":"event","kind":"fork","pid":"12","start":1}`+"\n"), 3, "bad event line"},
		{"NULs mid-record", with(7, "\x00\x00\x00\n"), 7, "not a JSON object"},
		{"huge line", with(3, strings.Repeat("x", maxLineLen+10)+"\n"), 3, "longer than"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := readRecord(strings.NewReader(c.input), "r.jsonl")
			var re *RecordError
			if !errors.As(err, &re) {
				t.Fatalf("error %v, want a *RecordError", err)
			}
			if re.Line != c.line || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("error %q: want line %d saying %q", err, c.line, c.says)
			}
			if !strings.Contains(err.Error(), "r.jsonl, line ") {
				t.Fatalf("error %q does not name the file and line", err)
			}
		})
	}
}

func TestReadRecordMissing(t *testing.T) {
	_, err := ReadRecord(filepath.Join(t.TempDir(), "nope.jsonl"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing record: %v", err)
	}
}

// checkNoPanic reads data and, when it reads, renders it every way; a
// rendered timeline must be JSON.
func checkNoPanic(t *testing.T, data []byte) {
	rec, _, err := readRecord(bytes.NewReader(data), "fuzz")
	if err != nil {
		var re *RecordError
		if errors.As(err, &re) && re.Line < 1 {
			t.Fatalf("error names line %d: %v", re.Line, err)
		}
		return
	}
	RenderTree(io.Discard, rec, TreeOptions{Color: true})
	RenderJSON(io.Discard, rec)
	var buf bytes.Buffer
	if err := RenderTimeline(&buf, rec); err != nil {
		t.Fatalf("timeline: %v", err)
	}
	if !json.Valid(buf.Bytes()) {
		t.Fatal("timeline is not JSON")
	}
}

// fuzzSeeds are records whole, cut, and damaged in the ways that matter.
func fuzzSeeds(t testing.TB) [][]byte {
	full := lineageBytes(t)
	seeds := [][]byte{
		full,
		full[:len(full)/2],
		full[:len(full)-3],
		[]byte(`{"v":1,"type":"hold","hold":{"id":"x"}}` + "\n"),
		[]byte(`{"v":1,"type":"hold","hold":{}}` + "\n" + `{"type":"event","kind":"fork","pid":2,"start":1,"ppid":3}` + "\n" + `{"type":"event","kind":"fork","pid":3,"start":1,"ppid":2}` + "\n"),
		[]byte(`{"v":1,"type":"hold","hold":{}}` + "\n" + `{"type":"event","kind":"exit","pid":2,"start":1,"time":"9999-12-31T23:59:59Z","exit_code":1}` + "\n" + `{"type":"fate","pid":2,"start":1,"fate":"kill","at":"0001-01-01T00:00:01Z"}`),
		[]byte(`{"v":1,"type":"hold","hold":{}}` + "\n" + `{"type":"reap","reap":{"by":{"pid":1,"start":2}}}` + "\n" + `{"type":"end","by":{"pid":1,"start":2}}` + "\n"),
	}
	return seeds
}

func TestReadFuzzSeeds(t *testing.T) {
	for _, s := range fuzzSeeds(t) {
		checkNoPanic(t, s)
	}
	// Every prefix of a whole record reads or fails cleanly.
	full := lineageBytes(t)
	for n := 0; n <= len(full); n += 7 {
		checkNoPanic(t, full[:n])
	}
}

func FuzzReadRecord(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkNoPanic(t, data) })
}
