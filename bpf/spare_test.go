// spare_test.go tests spare lineages as root: a taken spare tracks a
// payload as a loaded one does, and a spare that was ever used is refused.
package bpf

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/testenv"
)

// takeOne makes a spare and takes it; holds running beside the test may
// take the one made first, so it tries a few times.
func takeOne(t *testing.T, holdID string) *Lineage {
	t.Helper()
	for range 5 {
		_, err := MakeSpares(SpareCount() + 1)
		testenv.NeedBPF(t, err)
		l, err := TakeSpare(holdID)
		if err == nil {
			return l
		}
		if !errors.Is(err, ErrNoSpare) {
			t.Fatal(err)
		}
	}
	t.Fatal("no spare could be taken in 5 tries")
	return nil
}

func TestTakenSpareTracks(t *testing.T) {
	l := takeOne(t, "test-spare")
	if l.HoldID() != "test-spare" {
		t.Fatalf("taken spare names hold %q", l.HoldID())
	}
	_, cmd := launchMarkedIn(t, l, "sleep 300 & sleep 300 & wait")
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		ms, err := l.Members()
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) >= 3 {
			for _, m := range ms {
				if m.HoldID != HashHoldID("test-spare") {
					t.Fatalf("member %+v has another hold's id", m)
				}
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	ms, _ := l.Members()
	t.Fatalf("payload %d and its 2 children: %d members after 10 s, want 3", cmd.Process.Pid, len(ms))
}

func TestUsedSpareRefused(t *testing.T) {
	l, err := Load(Options{HoldID: "test-spare-used"})
	testenv.NeedBPF(t, err)
	defer l.Close()
	if err := l.checkPristine(); err == nil {
		t.Fatal("a lineage whose config names a hold passed as pristine")
	}
	fresh, err := loadObjects(SealFork, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if err := fresh.checkPristine(); err != nil {
		t.Fatalf("a fresh copy is refused: %v", err)
	}
}

func TestSpareRootMustBeRoots(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	if _, err := MakeSpares(0); err != nil {
		testenv.NeedBPF(t, err)
	}
	if err := os.Chmod(SpareRoot(), 0o777); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(SpareRoot(), 0o700)
	if _, err := TakeSpare("test-spare-open"); err == nil || errors.Is(err, ErrNoSpare) {
		t.Fatalf("a spare directory anyone can write was used: %v", err)
	}
}

// copyName names a subtest run with this process's own copy of an
// iterator or with the host's pinned one.
func copyName(shared bool) string { return map[bool]string{false: "own", true: "shared"}[shared] }

// pinForTest makes the spare directory (a fresh host has none) and pins a
// shared iterator with pin.
func pinForTest(t *testing.T, pin func() error) {
	t.Helper()
	root, err := openSpareRoot()
	if err == nil {
		root.Close()
		err = pin()
	}
	testenv.NeedBPF(t, err)
}
