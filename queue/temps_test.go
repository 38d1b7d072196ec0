// temps_test.go checks the cleanup of files being published: a young one
// is not even opened (its publisher is about to lock it, and a probe's
// shared lock in that instant makes the publisher's lock fail), and an old
// one that no process holds locked goes.
package queue

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Catches: a cleanup that probes every file being published, whatever its
// age (a publisher's enqueue then fails now and then with "cannot lock
// .tmp...: resource temporarily unavailable").
func TestYoungTempNotOpened(t *testing.T) {
	tq := openQ(t, t.TempDir(), "gpu")
	young, old := tmpPrefix+"1.young", tmpPrefix+"1.old"
	for _, name := range []string{young, old} {
		if err := os.WriteFile(filepath.Join(tq.path, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	then := time.Now().Add(-2 * staleTemp)
	if err := os.Chtimes(filepath.Join(tq.path, old), then, then); err != nil {
		t.Fatal(err)
	}
	in, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(in)
	if _, err := unix.InotifyAddWatch(in, filepath.Join(tq.path, young), unix.IN_OPEN); err != nil {
		t.Fatal(err)
	}
	tq.removeStaleTemps([]string{young, old})
	var buf [4096]byte
	if n, _ := unix.Read(in, buf[:]); n > 0 {
		t.Errorf("cleanup opened %s, a file being published for less than %v", young, staleTemp)
	}
	if _, err := os.Stat(filepath.Join(tq.path, young)); err != nil {
		t.Errorf("the young file being published is gone: %v", err)
	}
	if _, err := os.Stat(filepath.Join(tq.path, old)); !os.IsNotExist(err) {
		t.Errorf("the file left %v ago by a dead publisher is still there (%v)", 2*staleTemp, err)
	}
}
