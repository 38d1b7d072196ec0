// Package plant holds what the tests use to plant hostile files, the way
// another user of a shared directory would, and to check that nothing
// blocked on them or took them for what they are not.
package plant

import (
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/testenv"
)

// Within runs fn and fails the test when it takes longer than 5 s (a FIFO
// opened without O_NONBLOCK blocks for ever).
func Within(t testing.TB, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s blocked for 5 s (a FIFO opened without O_NONBLOCK?)", what)
	}
}

// FIFO makes a FIFO at path.
func FIFO(t testing.TB, path string) {
	t.Helper()
	if err := unix.Mkfifo(path, 0o666); err != nil {
		t.Fatal(err)
	}
}

// Device makes a character device node like /dev/null at path (root only).
func Device(t testing.TB, path string) {
	t.Helper()
	testenv.NeedRoot(t, "making a device node (mknod)")
	if err := unix.Mknod(path, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatal(err)
	}
}

// Says fails the test unless err is an error whose text has every one of
// subs (what it was about names the failure).
func Says(t testing.TB, err error, what string, subs ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want one saying %q", what, subs)
	}
	for _, s := range subs {
		if !strings.Contains(err.Error(), s) {
			t.Fatalf("%s: error %q does not say %q", what, err, s)
		}
	}
}
