// record_writer_test.go tests that every rendering says whose file a
// record is, from its owner, and says plainly when that owner is not the
// holder the record names.
package record

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writtenRecord writes a finished record naming holder uid holderUID (the
// file is this test's euid's) and reads it back with its writer set.
func writtenRecord(t *testing.T, holderUID int) *Record {
	t.Helper()
	path := filepath.Join(t.TempDir(), "r.jsonl")
	h := testHold()
	h.UID = holderUID
	w, err := CreateRecord(path, h)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	rec, err := ReadRecord(path)
	if err != nil {
		t.Fatal(err)
	}
	rec.SetWriter(func(uid int) string {
		switch uid {
		case os.Geteuid():
			return "me"
		case 4343:
			return "bob\x1b[2J"
		}
		return ""
	})
	return rec
}

func renderAll(t *testing.T, rec *Record) (tree, doc, trace string) {
	t.Helper()
	var a, b, c bytes.Buffer
	if err := RenderTree(&a, rec, TreeOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := RenderJSON(&b, rec); err != nil {
		t.Fatal(err)
	}
	if err := RenderTimeline(&c, rec); err != nil {
		t.Fatal(err)
	}
	return a.String(), b.String(), c.String()
}

func TestRecordWriterIsHolder(t *testing.T) {
	me := os.Geteuid()
	rec := writtenRecord(t, me)
	tree, doc, trace := renderAll(t, rec)
	if want := fmt.Sprintf("  file: written by uid %d (me), the holder it names\n", me); !strings.Contains(tree, want) {
		t.Errorf("tree lacks %q:\n%s", want, tree)
	}
	for name, out := range map[string]string{"tree": tree, "json": doc, "timeline": trace} {
		if strings.Contains(out, "warning") || strings.Contains(out, "not by the holder") || strings.Contains(out, "claim") {
			t.Errorf("%s of a genuine record warns:\n%s", name, out)
		}
	}
	var d struct{ Writer *Writer }
	if err := json.Unmarshal([]byte(doc), &d); err != nil || d.Writer == nil || d.Writer.UID != me || d.Writer.NotHolder {
		t.Errorf("json writer: %+v (%v), want uid %d, not_holder false", d.Writer, err, me)
	}
}

func TestRecordWriterNotHolder(t *testing.T) {
	me := os.Geteuid()
	holder := 4343
	if me == holder {
		holder++
	}
	rec := writtenRecord(t, holder)
	tree, doc, trace := renderAll(t, rec)
	first, _, _ := strings.Cut(tree, "\n")
	want := fmt.Sprintf("warning: record written by uid %d (me), not by the holder it names, uid %d", me, holder)
	if !strings.HasPrefix(first, want) || !strings.Contains(first, "its content is that user's claim") {
		t.Errorf("tree's first line is %q, want it to start %q and say it is a claim", first, want)
	}
	if !strings.Contains(tree, fmt.Sprintf("uid %d (the writer's claim)", holder)) {
		t.Errorf("tree's holder is not marked as the writer's claim:\n%s", tree)
	}
	var d struct{ Writer *Writer }
	if err := json.Unmarshal([]byte(doc), &d); err != nil || d.Writer == nil || !d.Writer.NotHolder || d.Writer.UID != me || d.Writer.HolderUID != holder || !strings.Contains(d.Writer.Warning, "not by the holder") {
		t.Errorf("json writer: %+v (%v), want uid %d, holder uid %d, not_holder", d.Writer, err, me, holder)
	}
	var tr struct {
		OtherData map[string]any
	}
	if err := json.Unmarshal([]byte(trace), &tr); err != nil || tr.OtherData["record_not_holder"] != true || tr.OtherData["record_writer_uid"] != float64(me) {
		t.Errorf("timeline otherData: %v (%v), want record_not_holder true, record_writer_uid %d", tr.OtherData, err, me)
	}
	if !strings.Contains(trace, fmt.Sprintf(`"name":"[written by uid %d (me), not its holder] gpu-hold`, me)) {
		t.Errorf("timeline's name does not say whose file it is:\n%s", trace)
	}
}

// A user name is printed with its control characters shown.
func TestRecordWriterNameSafe(t *testing.T) {
	rec := writtenRecord(t, os.Geteuid())
	rec.Writer = nil
	rec.File.UID = 4343
	rec.SetWriter(func(uid int) string { return map[int]string{4343: "bob\x1b[2J"}[uid] })
	tree, _, _ := renderAll(t, rec)
	if strings.Contains(tree, "\x1b") || !strings.Contains(tree, `uid 4343 (bob\x1b[2J)`) {
		t.Errorf("the writer's name reaches the terminal raw:\n%q", tree)
	}
}

// A record not read from a file says nothing of a writer.
func TestRecordWriterNoFile(t *testing.T) {
	rec := &Record{Hold: testHold()}
	rec.SetWriter(nil)
	if rec.Writer != nil {
		t.Errorf("writer of a record read from no file: %+v", rec.Writer)
	}
}
