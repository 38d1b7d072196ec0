// spare_recycle_test.go tests giving a finished lineage back to the spares,
// as root: what comes back is as fresh as a made spare (no seal, counter,
// member or event of the hold before), and what cannot be fresh, or is not
// wanted, is not given back. The tests run under GPU_HOLD_BPF_SEAL=fork,
// a request only spare tests make spares of, each holding the stock's lock
// (teststock), so the stock they count is their own.
package bpf

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/testenv"
	"github.com/gpu-hold/gpu-hold/internal/teststock"
)

// ownStock makes the spare directory, and takes and closes every spare of
// the fork request, so that a test starts with none.
func ownStock(t *testing.T) {
	t.Helper()
	teststock.Own(t, "fork")
	_, err := MakeSpares(0)
	testenv.NeedBPF(t, err)
	for {
		l, err := TakeSpare("test-recycle-empty")
		if errors.Is(err, ErrNoSpare) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		l.Close()
	}
}

// waitMembers waits up to 10 s for the lineage to hold n members.
func waitMembers(t *testing.T, l *Lineage, n int) []Member {
	t.Helper()
	var ms []Member
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var err error
		if ms, err = l.Members(); err != nil {
			t.Fatal(err)
		}
		if len(ms) == n {
			return ms
		}
	}
	t.Fatalf("%d members after 10 s, want %d: %+v", len(ms), n, ms)
	return nil
}

// usedLineage loads a lineage, runs a payload under it to its end (its
// fork and exit events left unread), seals it as a teardown does, and
// returns it with its reader.
func usedLineage(t *testing.T, holdID string) (*Lineage, *Reader) {
	t.Helper()
	l, err := Load(Options{HoldID: holdID})
	testenv.NeedBPF(t, err)
	rd, cmd := launchMarkedIn(t, l, "true & wait")
	cmd.Wait()
	waitMembers(t, l, 0)
	if err := l.Seal(); err != nil {
		t.Fatal(err)
	}
	return l, rd
}

func TestRecycledSpareIsFresh(t *testing.T) {
	ownStock(t)
	l, rd := usedLineage(t, "test-recycle-used")
	if ok, err := l.Recycle(rd); !ok || err != nil {
		t.Fatalf("a finished, empty lineage was not given back: %v, %v", ok, err)
	}
	if n := SpareCount(); n != 1 {
		t.Fatalf("%d spares after one was given back, want 1", n)
	}
	next, err := TakeSpare("test-recycle-next")
	if err != nil {
		t.Fatalf("the recycled spare was not taken: %v", err)
	}
	// Sealed at fork, the config left as it was would kill this payload
	// when it forks: its children must live and be its own.
	_, cmd := launchMarkedIn(t, next, "sleep 300 & sleep 300 & wait")
	for _, m := range waitMembers(t, next, 3) {
		if m.HoldID != HashHoldID("test-recycle-next") || m.Flags&(MemberBornSealed|MemberKilledAtBirth) != 0 {
			t.Fatalf("member %+v: another hold's, or born sealed", m)
		}
	}
	if c, _ := next.Counters(); c.Admitted != 3 || c.KilledAtBirth != 0 {
		t.Fatalf("counters %+v of a payload with 2 children, want 3 admitted (the last hold's not carried over)", c)
	}
	if cmd.ProcessState != nil {
		t.Fatalf("the payload ended: %v", cmd.ProcessState)
	}
}

func TestRecycleRefused(t *testing.T) {
	ownStock(t)
	refused := func(name string, l *Lineage, rd *Reader) {
		t.Helper()
		if ok, err := l.Recycle(rd); ok || err != nil {
			t.Errorf("%s: given back (%v, %v)", name, ok, err)
		}
		if n := SpareCount(); n != 0 {
			t.Errorf("%s: %d spares, want none", name, n)
		}
	}

	alive, err := Load(Options{HoldID: "test-recycle-alive"})
	testenv.NeedBPF(t, err)
	rd, _ := launchMarkedIn(t, alive, "sleep 300")
	waitMembers(t, alive, 1)
	refused("a lineage with a live member", alive, rd)

	forced, err := Load(Options{HoldID: "test-recycle-forced", Seal: SealFork})
	if err != nil {
		t.Fatal(err)
	}
	rd, _ = launchMarkedIn(t, forced, "true")
	refused("a lineage whose seal was forced", forced, rd)

	pinned, rd := usedLineage(t, "test-recycle-pinned")
	if _, err := pinned.Pin(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pinned.Unpin() })
	refused("a lineage its hold still pins", pinned, rd)

	busy, rd := usedLineage(t, "test-recycle-busy")
	root := takeStockLock(t)
	refused("a lineage given back while the stock lock stays taken", busy, rd)
	root.Close()

	teststock.Fill(t, SpareStock, func() error { _, err := MakeSpares(SpareStock); return err }, SpareCount)
	full, rd := usedLineage(t, "test-recycle-full")
	if ok, err := full.Recycle(rd); ok || err != nil || SpareCount() != SpareStock {
		t.Errorf("given back to a full stock: %v, %v; %d spares, want %d", ok, err, SpareCount(), SpareStock)
	}
}

func TestUnreadEventRefused(t *testing.T) {
	ownStock(t)
	l, rd := usedLineage(t, "test-recycle-unread")
	if err := l.reset(); err != nil {
		t.Fatal(err)
	}
	if err := l.checkPristine(); err == nil {
		t.Fatal("a lineage with the last payload's events unread passed as pristine")
	}
	if _, err := rd.Drain(func(Event) {}); err != nil {
		t.Fatal(err)
	}
	if err := l.checkPristine(); err != nil {
		t.Fatalf("reset and drained, still refused: %v", err)
	}
}

// takeStockLock takes the stock lock as a maker pinning a spare holds it,
// waiting while a hold's maker or lineage (of another request) has it.
func takeStockLock(t *testing.T) *os.File {
	t.Helper()
	return takeLock(t, "the stock lock", func() *os.File {
		root, _ := lockStock()
		return root
	})
}

// takeMakersLock takes the makers' lock as a maker at work holds it,
// waiting while a hold's maker (of another request) has it.
func takeMakersLock(t *testing.T) *os.File {
	t.Helper()
	return takeLock(t, "the makers' lock", func() *os.File {
		f, err := lockMakers()
		if err != nil {
			t.Fatal(err)
		}
		return f
	})
}

// takeLock calls take until it returns the lock, for up to 30 s.
func takeLock(t *testing.T, name string, take func() *os.File) *os.File {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if f := take(); f != nil {
			return f
		}
		if time.Now().After(end) {
			t.Fatalf("%s stayed taken for 30 s", name)
		}
	}
}

// TestRecycleBesideMaker: a lineage given back while a maker is at work
// (loading at SCHED_IDLE, for as long as a busy host makes it) goes back
// to the stock. Fails when a maker's work keeps lineages from the stock:
// a fast chain's heads then find none and load their own.
func TestRecycleBesideMaker(t *testing.T) {
	ownStock(t)
	maker := takeMakersLock(t)
	defer maker.Close()
	l, rd := usedLineage(t, "test-recycle-beside-maker")
	if ok, err := l.Recycle(rd); !ok || err != nil || SpareCount() != 1 {
		t.Errorf("given back beside a maker at work: %v, %v; %d spares, want 1", ok, err, SpareCount())
	}
}

// TestMakerCountsUnderLock: a maker that finds the stock full once its
// load is done (lineages given back meanwhile) frees the copy instead of
// pinning it. Fails when a maker pins without counting under the lock.
func TestMakerCountsUnderLock(t *testing.T) {
	ownStock(t)
	teststock.Fill(t, SpareStock, func() error { _, err := MakeSpares(SpareStock); return err }, SpareCount)
	root, err := os.Open(SpareRoot())
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	req, err := sealRequest()
	if err != nil {
		t.Fatal(err)
	}
	pinned, err := makeSpare(root, req, SealFork, SpareStock)
	if pinned || err != nil || SpareCount() != SpareStock {
		t.Errorf("a spare made for a full stock: pinned %v, %v; %d spares, want %d", pinned, err, SpareCount(), SpareStock)
	}
}
