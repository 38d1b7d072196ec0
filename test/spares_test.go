// spares_test.go tests the eBPF spares end to end, as root: an eBPF hold
// leaves a spare behind (through the detached maker it starts) and a later
// hold takes one; the maker carries nothing of the hold's, so it is never
// a marked process left over.
package test

import (
	"testing"
	"time"
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
