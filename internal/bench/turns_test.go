// turns_test.go runs both sides of the turn-by-turn spawner in this
// process: they must finish (no side left waiting for a turn, no write to
// a peer that is done) and each report its own spawn time.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func TestAlternateTakesTurns(t *testing.T) {
	// The /bin/true copies both sides start carry this test's marker.
	t.Setenv(markEnv, fmt.Sprintf("bench-test-%d-%d", os.Getpid(), time.Now().UnixNano()))
	dir := t.TempDir()
	toFirst, toSecond := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, f := range []string{toFirst, toSecond} {
		if err := syscall.Mkfifo(f, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out1, out2 := filepath.Join(dir, "1.ns"), filepath.Join(dir, "2.ns")
	done := make(chan struct{}, 2)
	go func() { alternate(7, out1, "tok", toFirst, toSecond, true); done <- struct{}{} }()
	go func() { alternate(7, out2, "tok", toSecond, toFirst, false); done <- struct{}{} }()
	for range 2 {
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("a side is still waiting for its turn after 30 s")
		}
	}
	for _, f := range []string{out1, out2} {
		ns, err := readNS(f)
		if err != nil || ns <= 0 {
			t.Fatalf("%s: %d ns, %v", f, ns, err)
		}
	}
	if _, err := os.Stat(out1 + ".tmp"); err == nil {
		t.Fatal("a temporary file was left behind")
	}
}
