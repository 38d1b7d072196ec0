// memfloor_test.go tests size parsing, the floor's flag/env resolution, the
// meminfo parser, and the watcher through a fake memory source.
package memfloor

import (
	"context"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/testenv"
)

func TestParseSize(t *testing.T) {
	good := map[string]uint64{
		"0": 0, "1048576": 1 << 20, "512M": 512 << 20, "512m": 512 << 20, "512MiB": 512 << 20,
		"8G": 8 << 30, "8GiB": 8 << 30, "8gb": 8 << 30, " 8 G ": 8 << 30, "64k": 64 << 10,
		"1T": 1 << 40, "1.5G": 3 << 29, "100B": 100, "0.5GiB": 1 << 29,
	}
	for in, want := range good {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "G", "8X", "8 GiBs", "-1G", "8iB", "1.2.3G", "99999999999T", "18446744073709551616"} {
		if got, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", in, got)
		}
	}
}

func TestResolveMemFloor(t *testing.T) {
	t.Setenv(Env, "")
	if n, err := Resolve(""); err != nil || n != 0 {
		t.Errorf("neither flag nor env: %d %v", n, err)
	}
	t.Setenv(Env, "6")
	if n, err := Resolve(""); err != nil || n != 6<<30 {
		t.Errorf("env 6: %d %v", n, err)
	}
	if n, err := Resolve("512M"); err != nil || n != 512<<20 {
		t.Errorf("the flag must win over the env: %d %v", n, err)
	}
	t.Setenv(Env, "1.5")
	if n, _ := Resolve(""); n != 3<<29 {
		t.Errorf("env 1.5: %d", n)
	}
	t.Setenv(Env, "lots")
	if _, err := Resolve(""); err == nil || !strings.Contains(err.Error(), Env) {
		t.Errorf("bad env: %v", err)
	}
	if _, err := Resolve("8X"); err == nil || !strings.Contains(err.Error(), "--mem-floor") {
		t.Errorf("bad flag: %v", err)
	}
}

func TestParseMemAvailable(t *testing.T) {
	text := "MemTotal:       32768000 kB\nMemFree:         1000000 kB\nMemAvailable:    3250000 kB\nBuffers:  1 kB\n"
	if n, err := parseMemAvailable([]byte(text)); err != nil || n != 3250000<<10 {
		t.Errorf("got %d %v", n, err)
	}
	if _, err := parseMemAvailable([]byte("MemTotal: 1 kB\n")); err == nil {
		t.Error("no MemAvailable line must be an error")
	}
	if n, err := Available(); err != nil || n == 0 {
		t.Errorf("this machine's MemAvailable: %d %v", n, err)
	}
}

func TestMemLowMessage(t *testing.T) {
	m := Low{Available: 3328599654, Floor: 8 << 30} // 3.1 GiB
	if got := m.Error(); got != "available memory 3.1 GiB fell below the floor 8.0 GiB" {
		t.Errorf("message: %q", got)
	}
}

// fakeMem is a memory source whose value the test sets; it counts reads.
type fakeMem struct {
	avail atomic.Uint64
	reads atomic.Int64
}

func (f *fakeMem) src() (uint64, error) {
	f.reads.Add(1)
	return f.avail.Load(), nil
}

// waitReads waits until the source was read n more times than now.
func (f *fakeMem) waitReads(t *testing.T, n int64) {
	t.Helper()
	want := f.reads.Load() + n
	deadline := time.Now().Add(10 * time.Second)
	for f.reads.Load() < want {
		if time.Now().After(deadline) {
			t.Fatalf("the watcher stopped reading the source (%d reads)", f.reads.Load())
		}
		time.Sleep(time.Millisecond)
	}
}

// fastWatch makes the cheap check run every few ms and, unless psi is set,
// takes PSI away, for the duration of the test.
func fastWatch(t *testing.T, psi bool) {
	oldI, oldP := memCheckInterval, psiPath
	memCheckInterval = 5 * time.Millisecond
	if !psi {
		psiPath = "/nonexistent/pressure/memory"
	}
	t.Cleanup(func() { memCheckInterval, psiPath = oldI, oldP })
}

func TestWatchMemFloorFiresBelowNotAbove(t *testing.T) {
	fastWatch(t, false)
	var m fakeMem
	m.avail.Store(10 << 30)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := Watch(ctx, 8<<30, m.src)
	if err != nil {
		t.Fatal(err)
	}
	m.waitReads(t, 10) // ten checks above the floor...
	select {
	case low := <-ch:
		t.Fatalf("fired above the floor: %+v", low)
	default:
	}
	m.avail.Store(8 << 30) // ...at the floor is not below it...
	m.waitReads(t, 5)
	select {
	case low := <-ch:
		t.Fatalf("fired at the floor: %+v", low)
	default:
	}
	m.avail.Store(3 << 30) // ...below it is.
	select {
	case low := <-ch:
		if low.Available != 3<<30 || low.Floor != 8<<30 {
			t.Errorf("got %+v", low)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("did not fire below the floor")
	}
	// It delivers once, then stops reading.
	time.Sleep(50 * time.Millisecond)
	n := m.reads.Load()
	time.Sleep(50 * time.Millisecond)
	if m.reads.Load() != n {
		t.Error("the watcher kept reading after it fired")
	}
}

func TestWatchMemFloorAlreadyBelow(t *testing.T) {
	fastWatch(t, false)
	var m fakeMem
	m.avail.Store(1 << 30)
	ch, err := Watch(context.Background(), 2<<30, m.src)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case low := <-ch:
		if low.Available != 1<<30 {
			t.Errorf("got %+v", low)
		}
	default:
		t.Fatal("a floor already above available memory must fire at once")
	}
}

func TestWatchMemFloorRespectsContext(t *testing.T) {
	fastWatch(t, false)
	var m fakeMem
	m.avail.Store(10 << 30)
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := Watch(ctx, 8<<30, m.src)
	if err != nil {
		t.Fatal(err)
	}
	m.waitReads(t, 3)
	cancel()
	time.Sleep(20 * time.Millisecond) // let a check in flight finish
	m.avail.Store(1 << 30)
	n := m.reads.Load()
	time.Sleep(100 * time.Millisecond) // twenty intervals
	if got := m.reads.Load(); got > n {
		t.Errorf("the source was read %d times after ctx ended", got-n)
	}
	select {
	case low := <-ch:
		t.Errorf("fired after ctx ended: %+v", low)
	default:
	}
}

func TestWatchMemFloorOffAndErrors(t *testing.T) {
	ch, err := Watch(context.Background(), 0, func() (uint64, error) { panic("read with no floor") })
	if ch != nil || err != nil {
		t.Errorf("floor 0: %v %v", ch, err)
	}
	_, err = Watch(context.Background(), 1, func() (uint64, error) { return 0, os.ErrNotExist })
	if err == nil || !strings.Contains(err.Error(), "available memory") {
		t.Errorf("an unreadable source at the start: %v", err)
	}
}

// With the real PSI file (where the kernel has one) the watcher still wakes
// on its timer, and fires from the fake source.
func TestWatchMemFloorWithPSI(t *testing.T) {
	fastWatch(t, true)
	fd := openPSITrigger()
	if fd < 0 {
		testenv.Need(t, "no PSI trigger on %s here (kernel without PSI, or not permitted)", psiPath)
	}
	os.NewFile(uintptr(fd), "psi").Close()
	var m fakeMem
	m.avail.Store(10 << 30)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := Watch(ctx, 8<<30, m.src)
	if err != nil {
		t.Fatal(err)
	}
	m.waitReads(t, 3)
	m.avail.Store(1 << 30)
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("did not fire with PSI in use")
	}
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[uint64]string{900: "900 bytes", 2048: "2.0 KiB", 512 << 20: "512.0 MiB", 8 << 30: "8.0 GiB"} {
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
