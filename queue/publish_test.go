// publish_test.go owns the test of a file being published while another
// user watches the directory: its lock cannot be sniped.
package queue

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// snipeHelper watches dir and takes a shared lock on every file being
// published as soon as it appears, holding it a moment: a publisher that
// locks after a stranger could open its file fails.
func snipeHelper(say func(string, ...any), dir string) int {
	in, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		say("err %v", err)
		return 1
	}
	if _, err := unix.InotifyAddWatch(in, dir, unix.IN_CREATE); err != nil {
		say("err %v", err)
		return 1
	}
	say("watching")
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Read(in, buf)
		if err != nil {
			return 1
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := strings.TrimRight(string(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+int(ev.Len)]), "\x00")
			off += unix.SizeofInotifyEvent + int(ev.Len)
			if !strings.HasPrefix(name, tmpPrefix) {
				continue
			}
			if fd, err := unix.Open(filepath.Join(dir, name), unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
				if unix.Flock(fd, unix.LOCK_SH|unix.LOCK_NB) == nil {
					say("sniped %s", name)
				}
				go func() { time.Sleep(20 * time.Millisecond); unix.Close(fd) }()
			}
		}
	}
}

// Another user who takes a shared lock on each file being published, the
// moment it appears, makes no enqueue fail.
func TestPublishNotSniped(t *testing.T) {
	dir := sharedDir(t)
	if err := os.Mkdir(filepath.Join(dir, "gpu"), 0o1777); err != nil {
		t.Fatal(err)
	}
	q := openQ(t, dir, "gpu")
	h := startHelper(t, "snipe", dir, "gpu", helperOpts{uid: 65534})
	h.expect("watching")
	for i := range 50 {
		w, err := q.Enqueue(Ticket{Label: "publisher"})
		if err != nil {
			t.Fatalf("enqueue %d of 50 failed beside a stranger watching the directory: %v", i+1, err)
		}
		w.Cancel()
	}
	h.kill()
}
