// spares_test.go tests the eBPF spares end to end, as root: an eBPF hold
// leaves a spare behind (its own lineage given back, or through the
// detached maker it starts) and a later hold takes one; the maker carries
// nothing of the hold's, so it is never a marked process left over; and a
// hold that gives its lineage back makes the host load nothing.
package test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/gpu-hold/gpu-hold/internal/teststock"
	"github.com/gpu-hold/gpu-hold/tracker"
)

// Catches: no maker started, a maker that fails or makes nothing, a take
// that never succeeds, a maker that inherits the hold's environment (a
// marked process left after the hold).
func TestBPFHoldsTakeSpares(t *testing.T) {
	if !hasBackend(t, "bpf") {
		t.Skip("no eBPF backend here")
	}
	seen := map[string]int{}
	deadline := time.Now().Add(slowed(30 * time.Second))
	for time.Now().Before(deadline) {
		mark := newMark(t)
		r := newHold(t, "", mark, "--track=bpf", "--", "true").Run(20 * time.Second)
		if r.Code != 0 {
			t.Fatalf("hold exited %d:\n%s", r.Code, r.Stderr)
		}
		requireNoneLeft(t, mark)
		lines := logLines(r.Stderr)
		i := findLog(lines, "payload started")
		if i < 0 {
			t.Fatalf("no \"payload started\" line:\n%s", r.Stderr)
		}
		progs := lines[i].str("bpf_programs")
		seen[progs]++
		if progs == "spare" {
			return
		}
		if progs != "loaded" {
			t.Fatalf("payload started with bpf_programs %q, want spare or loaded:\n%s", progs, r.Stderr)
		}
		// Holds of other tests take spares too: give the maker time.
		time.Sleep(slowed(500 * time.Millisecond))
	}
	t.Fatalf("no eBPF hold took a spare in %v (programs: %v)", slowed(30*time.Second), seen)
}

func hasBackend(t *testing.T, be string) bool {
	for _, b := range backends(t) {
		if b == be {
			return true
		}
	}
	return false
}

// Catches: a lineage not given back, and a maker started while the payload
// runs (it refills the stock with a fresh load, and the hold's own lineage,
// finding the stock full, is freed): either way the stock's programs
// change, where a chain of holds should pass the same copies round.
func TestBPFHoldGivesItsLineageBack(t *testing.T) {
	if !hasBackend(t, "bpf") {
		t.Skip("no eBPF backend here")
	}
	teststock.Own(t, "fork")
	teststock.Fill(t, 2, func() error { _, err := tracker.MakeSpares(); return err }, tracker.SpareCount)
	before := spareProgIDs(t)
	if len(before) != 2 {
		t.Fatalf("%d spares of GPU_HOLD_BPF_SEAL=fork after making them, want 2", len(before))
	}
	// The payload runs long enough for a maker started beside it to finish
	// (in about 0.1 s here).
	mark := newMark(t)
	r := newHold(t, "", mark, "--track=bpf", "--", "sleep", "2").Run(20 * time.Second)
	if r.Code != 0 {
		t.Fatalf("hold exited %d:\n%s", r.Code, r.Stderr)
	}
	requireNoneLeft(t, mark)
	if i := findLog(logLines(r.Stderr), "payload started"); i < 0 || logLines(r.Stderr)[i].str("bpf_programs") != "spare" {
		t.Fatalf("the hold took no spare:\n%s", r.Stderr)
	}
	// A maker the hold started would be done well within this.
	for end := time.Now().Add(slowed(2 * time.Second)); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if after := spareProgIDs(t); !slices.Equal(after, before) {
			t.Fatalf("spare programs %v after one hold, want the same two copies %v back", after, before)
		}
	}
}

// spareProgIDs lists, sorted, the ids of the fork programs of the spares
// pinned for GPU_HOLD_BPF_SEAL=fork.
func spareProgIDs(t *testing.T) []ebpf.ProgramID {
	t.Helper()
	names, err := os.ReadDir(tracker.SpareRoot())
	if err != nil {
		t.Fatal(err)
	}
	var ids []ebpf.ProgramID
	for _, n := range names {
		if strings.Count(n.Name(), "_") < 3 || strings.Split(n.Name(), "_")[1] != "fork" {
			continue // another request's spare, a shared iterator, or one being made or taken
		}
		p, err := ebpf.LoadPinnedProgram(filepath.Join(tracker.SpareRoot(), n.Name(), "prog_fork"), nil)
		if err != nil {
			continue // taken meanwhile
		}
		info, err := p.Info()
		p.Close()
		if err != nil {
			t.Fatal(err)
		}
		id, _ := info.ID()
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}
