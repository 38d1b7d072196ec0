package main

import (
	"os"
	"path/filepath"
	"testing"
)

// The spawner's children are counted once each, whether seen by their fork
// or their exec; the payload's own exec (whose argv holds the token) and
// other processes are not.
func TestRecordSpawned(t *testing.T) {
	lines := `{"v":1,"type":"hold","hold":{"backend":"bpf","payload":{"pid":100,"start":7},"counters":{"lost_events":2}}}
{"type":"event","kind":"exec","pid":100,"start":7,"filename":"/x/bench","argv":["bench","helper","spawn","3","out","TOK"]}
{"type":"event","kind":"fork","pid":101,"start":8,"ppid":100}
{"type":"event","kind":"exec","pid":101,"start":8,"filename":"/bin/true","argv":["/bin/true","TOK"]}
{"type":"event","kind":"exit","pid":101,"start":8}
{"type":"event","kind":"fork","pid":102,"start":9,"ppid":100}
{"type":"event","kind":"exec","pid":103,"start":9,"filename":"/bin/true","argv":["/bin/true","TOK"]}
{"type":"event","kind":"fork","pid":104,"start":9,"ppid":55}
{"type":"event","kind":"exec","pid":104,"start":9,"filename":"/bin/true","argv":["/bin/true","other"]}
not json
{"type":"end"}
`
	path := filepath.Join(t.TempDir(), "rec.jsonl")
	if err := os.WriteFile(path, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := readRecord(path)
	if err != nil {
		t.Fatal(err)
	}
	seen, execs := r.spawned("TOK")
	if seen != 3 || execs != 2 {
		t.Fatalf("spawned = %d seen, %d execs; want 3, 2", seen, execs)
	}
	if r.Hold.Counters.LostEvents != 2 || r.Hold.Backend != "bpf" {
		t.Fatalf("header = %+v", r.Hold)
	}
}
