// seq_test.go tests that planted ticket names and a rewritten counter
// cannot poison numbering (ESCAPES T4, T2): numbers never run out, never
// wrap below a waiter, and a waiter already queued stays ahead.
package queue

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestPoisonedNamesAndCounter(t *testing.T) {
	plants := map[string]string{
		"max-digits":   "t.99999999999999999999",
		"max-uint64":   "t.18446744073709551615",
		"max-uint64-1": "t.18446744073709551614",
		"below-1e19":   "t.09999999999999999999",
		"suffix":       "t.09999999999999999999.x",
		"suffix-small": "t.00000000000000000007x",
	}
	counters := map[string]string{
		"counter-max":     "09999999999999999999\n",
		"counter-uint64":  "18446744073709551615\n",
		"counter-garbage": "zzz\n",
	}
	for name, file := range plants {
		t.Run(name, func(t *testing.T) { poisoned(t, func(res string) { plant(t, res, file, "{}") }) })
	}
	for name, value := range counters {
		t.Run(name, func(t *testing.T) { poisoned(t, func(res string) { plant(t, res, seqName, value) }) })
	}
	// A number the clock has passed is believed: the counter jumps, and
	// the order is kept.
	t.Run("plausible-jump", func(t *testing.T) {
		poisoned(t, func(res string) { plant(t, res, "t.00000009000000000000", "{}") })
	})
}

// poisoned queues a waiter behind a holder, lets spoil plant its file, and
// checks that the next ticket gets a small number behind the waiter, and
// that the queue keeps its order.
func poisoned(t *testing.T, spoil func(res string)) {
	dir := t.TempDir()
	q := openQ(t, dir, "gpu")
	first := take(t, q, "first")
	w, err := q.Enqueue(Ticket{Label: "waiter"})
	if err != nil {
		t.Fatal(err)
	}
	spoil(q.path)
	late, err := q.Enqueue(Ticket{Label: "late"})
	if err != nil {
		t.Fatalf("a planted file made Enqueue fail: %v", err)
	}
	got, ahead := late.Ticket().Seq, w.Ticket().Seq
	if got <= ahead || got > ahead+10 && got != 9e12+1 {
		t.Fatalf("the ticket after the planting got %d; want just after the waiter's %d", got, ahead)
	}
	first.Release()
	g, err := w.Wait(ctxT(t, 5*time.Second), nil)
	if err != nil {
		t.Fatalf("the waiter queued first did not get the token: %v", err)
	}
	g.Release()
	g, err = late.Wait(ctxT(t, 5*time.Second), nil)
	if err != nil {
		t.Fatalf("the late ticket did not get the token after the waiter: %v", err)
	}
	g.Release()
}

func plant(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestPlausibleSeq(t *testing.T) {
	for seq, want := range map[uint64]bool{0: false, 1: true, 1e12: true, 1e18: false, 1<<64 - 1: false} {
		if got := plausibleSeq(seq); got != want {
			t.Errorf("plausibleSeq(%d) = %v, want %v", seq, got, want)
		}
	}
}
