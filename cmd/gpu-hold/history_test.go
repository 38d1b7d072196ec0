// history_test.go owns the test of gpu-hold history over records written
// by the record writer: newest first, the cause and exit code, running and
// died holds, --me, -n and --json.
package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/record"
)

// pastRecord writes resource res's record of hold id, granted at at; code
// nil leaves it without its end line.
func pastRecord(t *testing.T, dir, res, id, label string, at time.Time, holder proc.Ident, code *int, cause record.Cause) {
	t.Helper()
	os.MkdirAll(filepath.Join(dir, res), 0o755)
	os.WriteFile(filepath.Join(dir, res, "seq"), []byte("1\n"), 0o644)
	w, err := record.CreateRecord(record.RecordPath(filepath.Join(dir, res), id), record.HoldInfo{ID: id, Resource: res, Label: label, Holder: holder,
		Times: record.HoldTimes{Granted: at, PayloadStart: at, Released: at.Add(90 * time.Second)}})
	if err != nil {
		t.Fatal(err)
	}
	w.Event(record.Event{Kind: record.Fork, Time: at, Ident: proc.Ident{PID: 4242, Start: 1}})
	if code == nil {
		w.Flush()
		t.Cleanup(func() { w.Close() })
		return
	}
	w.Update(func(h *record.HoldInfo) { h.ExitCode, h.Cause = code, cause })
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestHistory(t *testing.T) {
	dir := t.TempDir()
	self, _ := proc.Self()
	t0 := time.Now().Add(-time.Hour)
	c0, c77 := 0, 77
	pastRecord(t, dir, "gpu", "20261201T100000-00000001", "first", t0, self, &c0, record.CauseExited)
	pastRecord(t, dir, "npu", "20261201T110000-00000002", "second", t0.Add(time.Minute), self, &c77, record.CauseCancelled)
	pastRecord(t, dir, "gpu", "20261201T120000-00000003", "live", t0.Add(2*time.Minute), self, nil, "")
	pastRecord(t, dir, "gpu", "20261201T130000-00000004", "gone", t0.Add(3*time.Minute), proc.Ident{PID: self.PID, Start: self.Start + 1}, nil, "")

	code, out, stderr, _ := cliIn(t, dir, "history")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 5 {
		t.Fatalf("history: exit %d\n%s%s", code, out, stderr)
	}
	for i, want := range [][]string{
		{"TIME", "RESOURCE", "USER", "LABEL", "CAUSE", "EXIT", "DURATION", "PROCS", "HOLD_ID"},
		{"gpu", "gone", "died", " - "},
		{"gpu", "live", "running"},
		{"npu", "second", "cancelled", " 77 ", "1m30s", "20261201T110000-00000002"},
		{"gpu", "first", "exited", " 0 ", "1m30s", " 1 "},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i], w) {
				t.Errorf("line %d %q lacks %q", i, lines[i], w)
			}
		}
	}
	code, out, _, _ = cliIn(t, dir, "history", "-n", "1", "-r", "npu", "--json")
	var got []pastHold
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil || len(got) != 1 || got[0].Cause != "cancelled" || *got[0].ExitCode != 77 || got[0].DurationMS != 90000 {
		t.Errorf("history -n 1 -r npu --json: exit %d\n%s", code, out)
	}
}

// cliIn is cli with --dir set to dir.
func cliIn(t *testing.T, dir string, args ...string) (int, string, string, string) {
	t.Helper()
	return cli(t, append([]string{"--dir=" + dir}, args...)...)
}
