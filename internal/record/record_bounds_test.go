// record_bounds_test.go owns the tests of the reader's bounds on a whole
// record (anyone may plant one for a reap to read) and of ReadRecordIf,
// which reads nothing it would not believe.
package record

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/safefs"
)

// forks writes a record of n fork events, of n processes.
func forks(t *testing.T, n int) string {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	w, err := CreateRecord(path, testHold())
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		w.Event(Event{Kind: Fork, Ident: proc.Ident{PID: 1000 + i, Start: 7}, PPID: 1, Time: time.Now()})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// setBound sets *v for the test.
func setBound(t *testing.T, v *int, n int) {
	old := *v
	*v = n
	t.Cleanup(func() { *v = old })
}

func TestReadRecordBounds(t *testing.T) {
	setBound(t, &maxRecordProcesses, 40)
	if _, err := ReadRecord(forks(t, 40)); err != nil {
		t.Fatalf("a record at the bound of processes: %v", err)
	}
	var re *RecordError
	if _, err := ReadRecord(forks(t, 41)); !errors.As(err, &re) {
		t.Fatalf("a record past the bound of processes was read: %v", err)
	}
	setBound(t, &maxRecordLines, 30)
	if _, err := ReadRecord(forks(t, 35)); !errors.As(err, &re) || re.Line != 31 {
		t.Fatalf("a record past the bound of lines was read: %v", err)
	}
}

func TestReadRecordIfReadsNothingUntrusted(t *testing.T) {
	path := forks(t, 3)
	if err := os.WriteFile(path, []byte("not a record at all\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var ue *UntrustedError
	_, err := ReadRecordIf(path, func(f safefs.Info) string { return "not its holder's" })
	if !errors.As(err, &ue) || ue.Why != "not its holder's" {
		t.Fatalf("ReadRecordIf read a file it would not believe: %v", err)
	}
}
