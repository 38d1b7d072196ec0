// lineage_test.go checks Lineage's capabilities: each answers
// ErrNotSupported where its backend has none, and the guard's view of a
// held lineage counts the holder's descendants and nobody else.
package tracker

import (
	"errors"
	"os"
	"testing"

	"github.com/gpu-hold/gpu-hold/internal/proc"
)

func TestLineageProcfsCapabilities(t *testing.T) {
	l, err := New(BackendProc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Pin(); !errors.Is(err, ErrNotSupported) {
		t.Errorf("procfs Pin: %v, want ErrNotSupported", err)
	}
	if err := l.Unpin(); !errors.Is(err, ErrNotSupported) {
		t.Errorf("procfs Unpin: %v, want ErrNotSupported", err)
	}
	if _, err := l.Has(proc.Ident{PID: 1}); !errors.Is(err, ErrNotSupported) {
		t.Errorf("procfs Has: %v, want ErrNotSupported", err)
	}
	if m, p := l.SealMode(), l.Programs(); m != SealPasses || p != "" {
		t.Errorf("procfs SealMode, Programs = %q, %q; want %q, \"\"", m, p, SealPasses)
	}
	if err := l.Finish(); err != nil {
		t.Errorf("procfs Finish: %v", err)
	}
}

func TestLineageRecordHasNoAccount(t *testing.T) {
	l, src := Resume(Claim{}, nil)
	if src != SourceRecord {
		t.Fatalf("Resume without a pin: source %q, want %q", src, SourceRecord)
	}
	if _, _, err := l.Account(); !errors.Is(err, ErrNotSupported) {
		t.Errorf("a record's lineage Account: %v, want ErrNotSupported", err)
	}
	if _, ok := l.Snapshot(); ok {
		t.Error("a record's lineage says a pass need not walk /proc")
	}
}

func TestOpenHeldCountsDescendantsOnly(t *testing.T) {
	self, err := proc.ReadStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	child := startMarked(t, []string{"cat"}, nil)
	st, err := proc.ReadStat(child.pid)
	if err != nil {
		t.Fatal(err)
	}
	init, err := proc.ReadStat(1)
	if err != nil {
		t.Fatal(err)
	}
	v := OpenHeld(self.Ident, "no-such-hold-"+t.Name())
	defer v.Close()
	for _, c := range []struct {
		what string
		id   proc.Ident
		want bool
	}{
		{"the holder", self.Ident, true},
		{"its child", st.Ident, true},
		{"its child's pid with another start time", proc.Ident{PID: st.PID, Start: st.Start + 1}, false},
		{"init", init.Ident, false},
	} {
		if got, err := v.Has(c.id); err != nil || got != c.want {
			t.Errorf("Has(%s) = %v, %v; want %v", c.what, got, err, c.want)
		}
	}
	if err := v.Seal(); err == nil {
		t.Error("a view of another's hold sealed it")
	}
	if v.Cgroup() != "" {
		t.Errorf("Cgroup = %q for a hold that made none", v.Cgroup())
	}
}
