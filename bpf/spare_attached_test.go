// spare_attached_test.go tests that a spare is pinned attached, as root:
// a taker opens the links the maker attached instead of attaching its own,
// a recycled spare keeps its links, and an attached spare admits no one
// however much the host forks, execs and exits beside it.
package bpf

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cilium/ebpf/link"

	marks "github.com/gpu-hold/gpu-hold/internal/mark"
	"github.com/gpu-hold/gpu-hold/internal/teststock"
)

// onlySpare makes one spare of the test's own stock and names its
// directory.
func onlySpare(t *testing.T) string {
	t.Helper()
	ownStock(t)
	teststock.Fill(t, 1, func() error { _, err := MakeSpares(1); return err }, SpareCount)
	req, _ := sealRequest()
	names, err := spareNames()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if _, ok := spareSeal(n, req); ok {
			return filepath.Join(SpareRoot(), n)
		}
	}
	t.Fatalf("no spare of %s among %v after MakeSpares(1)", req, names)
	return ""
}

// pinnedLinkIDs reads the ids of the links pinned in dir (in pinLinks'
// order); a missing pin fails the test.
func pinnedLinkIDs(t *testing.T, dir string) []link.ID {
	t.Helper()
	var ids []link.ID
	for _, name := range pinLinks {
		lk, err := link.LoadPinnedLink(filepath.Join(dir, name), nil)
		if err != nil {
			t.Fatalf("spare %s: %v", filepath.Base(dir), err)
		}
		info, err := lk.Info()
		lk.Close() // the pin keeps it attached
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, info.ID)
	}
	return ids
}

// linkIDs are the ids of l's links.
func linkIDs(t *testing.T, l *Lineage) []link.ID {
	t.Helper()
	var ids []link.ID
	for _, lk := range l.links {
		info, err := lk.Info()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, info.ID)
	}
	return ids
}

func TestSpareTakenAttached(t *testing.T) {
	pinned := pinnedLinkIDs(t, onlySpare(t))
	l, err := TakeSpare("test-spare-attached")
	if err != nil {
		t.Fatal(err)
	}
	if got := linkIDs(t, l); !slices.Equal(got, pinned) {
		t.Fatalf("taken spare's links %v, want the ones its maker pinned %v (attached again)", got, pinned)
	}
	launchMarkedIn(t, l, "sleep 300 & sleep 300 & wait")
	waitMembers(t, l, 3)
}

func TestRecycledSpareKeepsItsLinks(t *testing.T) {
	ownStock(t)
	l, rd := usedLineage(t, "test-recycle-links")
	held := linkIDs(t, l)
	if ok, err := l.Recycle(rd); !ok || err != nil {
		t.Fatalf("not given back: %v, %v", ok, err)
	}
	next, err := TakeSpare("test-recycle-links-next")
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	if got := linkIDs(t, next); !slices.Equal(got, held) {
		t.Fatalf("recycled spare's links %v, want the hold's own %v", got, held)
	}
}

// The host forks, execs and exits (threads and processes, a child of a
// child, one that outlives its parent) while a spare sits attached: it
// must still pass as never used.
func TestAttachedSpareAdmitsNoOne(t *testing.T) {
	dir := onlySpare(t)
	pinnedLinkIDs(t, dir) // attached
	mark := marks.New()
	t.Cleanup(func() { marks.Kill(mark) })
	for range 5 {
		cmd := exec.Command("bash", "-c", "(true; (sleep 0.01 &) ; /bin/true) & wait; for i in 1 2 3; do /bin/true; done")
		cmd.Env = append(os.Environ(), marks.Env+"="+mark)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	l, err := TakeSpare("test-spare-inert")
	if err != nil {
		t.Fatalf("an attached spare was refused after the host ran processes beside it: %v", err)
	}
	l.Close()
}
