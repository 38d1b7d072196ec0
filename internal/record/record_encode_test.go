// record_encode_test.go holds the hand-written event line encoding to
// encoding/json's bytes, over every field and every kind of string.
package record

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/proc"
)

// oddStrings are strings encoding/json escapes or rewrites.
var oddStrings = []string{
	"", "plain", `say "hi"`, `back\slash`, "a && b", "<tag>", "tab\tnew\nline\r", "\b\f\x00\x1f\x7f",
	"héllo", "日本語", "\u2028\u2029", "bad \xff\xfe utf-8", "\xc3", "emoji 🎉", "--flag=value", "/usr/bin/true",
}

func randomString(r *rand.Rand) string {
	if r.IntN(3) == 0 {
		return oddStrings[r.IntN(len(oddStrings))]
	}
	b := make([]byte, r.IntN(40))
	for i := range b {
		if r.IntN(4) == 0 {
			b[i] = byte(r.IntN(256))
		} else {
			b[i] = byte(0x20 + r.IntN(0x5f))
		}
	}
	return string(b)
}

func randomEventLine(r *rand.Rand) eventLine {
	kinds := []Kind{Fork, Exec, Exit, Regroup, KilledAtBirth}
	zones := []*time.Location{time.UTC, time.Local, time.FixedZone("x", -(3*3600 + 30*60)), time.FixedZone("y", 5*3600+45*60)}
	pick := func() int { return []int{0, 1, -1, 4194304, 1 << 40, -(1 << 62)}[r.IntN(6)] }
	ptr := func() *int {
		if r.IntN(2) == 0 {
			return nil
		}
		v := pick()
		return &v
	}
	ev := Event{
		Kind:  kinds[r.IntN(len(kinds))],
		Time:  time.Unix(r.Int64N(1<<34), r.Int64N(1e9)*int64(r.IntN(2))).In(zones[r.IntN(len(zones))]),
		Ident: proc.Ident{PID: pick(), Start: r.Uint64() >> r.IntN(64)},
		PPID:  pick(), PGID: pick(), SID: pick(),
		UID: ptr(), ExitCode: ptr(), Signal: ptr(),
	}
	if r.IntN(2) == 0 {
		ev.Filename = randomString(r)
	}
	for range r.IntN(4) {
		ev.Argv = append(ev.Argv, randomString(r))
	}
	if r.IntN(5) == 0 {
		ev.Argv = []string{} // empty, not nil: omitted all the same
	}
	return eventLine{Type: lineEvent, Event: ev, ArgvTruncated: r.IntN(2) == 0}
}

func TestEventLineMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	check := func(l eventLine) {
		t.Helper()
		want, werr := json.Marshal(&l)
		got, gerr := appendEventLine([]byte("prefix"), &l)
		if (werr != nil) != (gerr != nil) {
			t.Fatalf("error: encoding/json %v, hand-written %v", werr, gerr)
		}
		if werr == nil && !bytes.Equal(got, append([]byte("prefix"), want...)) {
			t.Fatalf("event line differs from encoding/json:\n got  %s\n want prefix%s", got, want)
		}
	}
	for range 5000 {
		check(randomEventLine(r))
	}
	for _, s := range oddStrings {
		l := randomEventLine(r)
		l.Filename, l.Argv = s, []string{s, s}
		check(l)
	}
	// A time RFC 3339 cannot carry: the same error as encoding/json.
	l := randomEventLine(r)
	l.Time = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	check(l)
}

// TestRecordEventLineUnencodable: a line that cannot be encoded leaves
// nothing of itself in the record, and the writer says why.
func TestRecordEventLineUnencodable(t *testing.T) {
	path := t.TempDir() + "/r.jsonl"
	w, err := CreateRecord(path, testHold())
	if err != nil {
		t.Fatal(err)
	}
	ev := lineageEvents()[0]
	w.Event(ev)
	ev.Time = time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)
	w.Event(ev)
	if err := w.Close(); err == nil {
		t.Fatal("Close: no error for an event the record cannot encode")
	}
	rec, err := ReadRecord(path)
	if err != nil {
		t.Fatalf("the record is damaged by the failed line: %v", err)
	}
	if len(rec.Processes) == 0 {
		t.Fatal("the event before the failed one is gone")
	}
}

func BenchmarkEventLine(b *testing.B) {
	uid, code := 1000, 0
	ls := []eventLine{
		{Type: lineEvent, Event: Event{Kind: Fork, Time: time.Now(), Ident: proc.Ident{PID: 4242, Start: 123456}, PPID: 4241, PGID: 4000, SID: 3999, UID: &uid}},
		{Type: lineEvent, Event: Event{Kind: Exec, Time: time.Now(), Ident: proc.Ident{PID: 4242, Start: 123456}, PGID: 4000, SID: 3999, UID: &uid, Filename: "/bin/true", Argv: []string{"/bin/true", "token"}}},
		{Type: lineEvent, Event: Event{Kind: Exit, Time: time.Now(), Ident: proc.Ident{PID: 4242, Start: 123456}, PGID: 4000, SID: 3999, UID: &uid, ExitCode: &code}},
	}
	b.Run("hand", func(b *testing.B) {
		var buf []byte
		for i := 0; b.Loop(); i++ {
			buf, _ = appendEventLine(buf[:0], &ls[i%3])
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			json.Marshal(&ls[i%3])
		}
	})
}
