// Package teststock lets a test own the eBPF spare stock of one seal
// request for its duration: go test runs the bpf and tracker packages as
// processes of their own at the same time, and a test that counts the
// stock must not see another process take from it or give back to it.
package teststock

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/testenv"
)

// lockName is the lock's file in the temporary directory (writable in
// the kernel matrix's guest too, whose root file system is read-only).
const lockName = "gpu-hold-test-spare-stock.lock"

// Own sets GPU_HOLD_BPF_SEAL to req for t and holds, until t ends, the lock
// every test that counts req's stock takes first.
func Own(t testing.TB, req string) {
	t.Helper()
	testenv.NeedRoot(t, "a test of the eBPF spares")
	t.Setenv("GPU_HOLD_BPF_SEAL", req) // bpf.SealEnv (bpf's own tests import this package)
	path := filepath.Join(os.TempDir(), lockName)
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		t.Fatalf("opening %s: %v", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
		f.Close()
		t.Fatalf("locking %s: %v", path, err)
	}
	t.Cleanup(func() { f.Close() })
}

// Fill calls mk until count says n spares are there: makers of every
// request share one lock, and mk returns at once, having made nothing,
// while a hold's maker (of another request) holds it.
func Fill(t testing.TB, n int, mk func() error, count func() int) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); count() < n; time.Sleep(20 * time.Millisecond) {
		if err := mk(); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(end) {
			t.Fatalf("%d spares after 30 s of making them, want %d", count(), n)
		}
	}
}
