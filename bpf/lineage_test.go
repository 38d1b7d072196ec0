// lineage_test.go tests the bpf package on its own: event decoding (no
// privileges needed), and, as root, that a full lineage map is counted and
// flagged rather than silent.
package bpf

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	marks "github.com/gpu-hold/gpu-hold/internal/mark"
	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/testenv"
)

func TestDecodeExec(t *testing.T) {
	var x lineageExecEvent
	x.Hdr = lineageEvent{Kind: uint32(KindExec), Pid: 42, Ppid: 41, Pgid: 40, Sid: 30, Uid: 1000, StartNs: 123_450_000_000, TimeNs: 7, ExitCode: -5, Flags: EventArgvTruncated}
	copy8(x.Filename[:], "/usr/bin/sleep")
	args := "sleep\x00300\x00--x\x00"
	copy8(x.Argv[:], args)
	x.ArgvLen = uint32(len(args))
	raw, err := binary.Append(nil, binary.NativeEndian, &x)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Kind != KindExec || ev.PID != 42 || ev.PPID != 41 || ev.PGID != 40 || ev.SID != 30 || ev.UID != 1000 || ev.TimeNs != 7 || ev.Status != -5 || ev.Flags != EventArgvTruncated {
		t.Fatalf("header decoded as %+v", ev)
	}
	if NsToTicks(ev.StartNs) != 12345 {
		t.Fatalf("start %d ns is %d ticks, want 12345", ev.StartNs, NsToTicks(ev.StartNs))
	}
	if ev.Filename != "/usr/bin/sleep" {
		t.Fatalf("filename %q", ev.Filename)
	}
	if want := []string{"sleep", "300", "--x"}; len(ev.Argv) != 3 || ev.Argv[0] != want[0] || ev.Argv[1] != want[1] || ev.Argv[2] != want[2] {
		t.Fatalf("argv %q, want %q", ev.Argv, want)
	}
	if _, err := decode(raw[:10]); err == nil {
		t.Fatal("a short record decoded without error")
	}
	if _, err := decode(raw[:eventSize]); err == nil {
		t.Fatal("a short exec record decoded without error")
	}
}

func copy8(dst []int8, s string) {
	for i := 0; i < len(s) && i < len(dst); i++ {
		dst[i] = int8(s[i])
	}
}

func TestExitStatus(t *testing.T) {
	for _, c := range []struct {
		status    int32
		code, sig int
	}{
		{0, 0, 0},
		{7 << 8, 7, 0},
		{255 << 8, 255, 0},
		{9, 0, 9},            // SIGKILL
		{15, 0, 15},          // SIGTERM
		{0x80 | 11, 0, 11},   // SIGSEGV with a core dump
		{0x80 | 6, 0, 6},     // SIGABRT with a core dump
		{1<<16 | 3<<8, 3, 0}, // bits above the status byte are ignored
	} {
		code, sig := Event{Status: c.status}.ExitStatus()
		if code != c.code || sig != c.sig {
			t.Errorf("status %#x: code %d signal %d, want %d %d", c.status, code, sig, c.code, c.sig)
		}
	}
}

// TestOverflowCounted fills a lineage map of capacity 4 with a payload that
// has 8 children: the children that do not fit are counted and flagged.
func TestOverflowCounted(t *testing.T) {
	l, rd, _ := launchMarked(t, Options{HoldID: "test-overflow", Capacity: 4}, "for i in 1 2 3 4 5 6 7 8; do sleep 300 & done; wait")

	notStored := 0
	deadline := time.Now().Add(10 * time.Second)
	for notStored < 5 && time.Now().Before(deadline) {
		// The programs do not wake the reader for each event: drain on a
		// short period, as the tracker does.
		time.Sleep(20 * time.Millisecond)
		if _, err := rd.Drain(func(ev Event) {
			if ev.Kind == KindFork && ev.Flags&EventNotStored != 0 {
				notStored++
			}
		}); err != nil {
			t.Fatalf("after %d flagged events: %v", notStored, err)
		}
	}
	if notStored < 5 {
		t.Fatalf("%d fork events flagged not stored in 10 s, want 5", notStored)
	}
	c, err := l.Counters()
	if err != nil {
		t.Fatal(err)
	}
	ms, err := l.Members()
	if err != nil {
		t.Fatal(err)
	}
	r, err := l.Root()
	if err != nil {
		t.Fatal(err)
	}
	// The payload and 3 children fit; the other 5 children do not. (Go's
	// own short-lived probe child, when it forked one, was admitted too.)
	if c.Overflow != 5 || c.Admitted != 3+uint64(r.Forks) || len(ms) != 4 || c.Live != 4 {
		t.Fatalf("counters %+v, root %+v, %d members: want 5 overflowed, 4 stored and counted live", c, r, len(ms))
	}
	for _, m := range ms {
		if (m.PID != r.PID || m.Flags != MemberRoot) && m.Parent != r.PID {
			t.Fatalf("member %+v is neither the payload (%d) nor its child", m, r.PID)
		}
	}
}

// TestLiveCountsEntries: the programs' count of the lineage map's entries
// follows the forks and exits (a payload and its three children, then
// none), so that 0 can stand for a read of the whole map.
func TestLiveCountsEntries(t *testing.T) {
	l, _, cmd := launchMarked(t, Options{HoldID: "test-live"}, "for i in 1 2 3; do sleep 300 & done; wait")
	counted := func(want int) {
		t.Helper()
		var c Counters
		var ms []Member
		for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			var err error
			if c, err = l.Counters(); err != nil {
				t.Fatal(err)
			}
			if ms, err = l.Members(); err != nil {
				t.Fatal(err)
			}
			if len(ms) == want && c.Live == uint64(want) {
				return
			}
		}
		t.Fatalf("%d members and a count of %d, want %d of each", len(ms), c.Live, want)
	}
	counted(4)
	marks.Kill(strings.TrimPrefix(cmd.Env[len(cmd.Env)-1], "GPU_HOLD_TEST_MARK="))
	cmd.Wait()
	counted(0)
}

// TestStateBeforeTheCount: a state map pinned by a build whose state had
// no count (a dead holder's, across an upgrade) reads with its counters and
// a count that is never taken for empty.
func TestStateBeforeTheCount(t *testing.T) {
	old := binary.Size(lineageHoldState{}) - 8
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: uint32(old), MaxEntries: 1})
	testenv.NeedBPF(t, err)
	defer m.Close()
	v := make([]byte, old)
	binary.LittleEndian.PutUint64(v, 7) // admitted
	if err := m.Put(uint32(0), v); err != nil {
		t.Fatal(err)
	}
	l := &Lineage{maps: lineageMaps{State: m}}
	c, err := l.Counters()
	if err != nil || c.Admitted != 7 || c.Live != LiveUnknown {
		t.Fatalf("counters %+v, %v: want 7 admitted and the count unknown", c, err)
	}
}

// TestBurstWakesReader: a payload whose burst of execs is four times the
// ring buffer drains through the programs' wake-up at half full (Woken),
// with no periodic drain at all, and loses nothing. Without the wake-up
// (or with a threshold fixed at the default size), events are lost.
func TestBurstWakesReader(t *testing.T) {
	// About 700 bytes of events per spawn: 400 spawns are over 4 buffers.
	l, rd, cmd := launchMarked(t, Options{HoldID: "test-burst", EventBytes: 64 << 10}, "for i in $(seq 400); do /bin/true; done")
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	execs, wakes := 0, 0
	count := func(ev Event) {
		if ev.Kind == KindExec && ev.Filename == "/bin/true" {
			execs++
		}
	}
	var werr error
	for running := true; running; {
		select {
		case <-rd.Woken():
			wakes++
			if _, err := rd.Drain(count); err != nil {
				t.Fatal(err)
			}
		case werr = <-done:
			running = false
		case <-time.After(60 * time.Second):
			t.Fatal("the burst did not end in 60 s")
		}
	}
	if werr != nil {
		t.Fatalf("burst payload: %v", werr)
	}
	if _, err := rd.Drain(count); err != nil {
		t.Fatal(err)
	}
	c, err := l.Counters()
	if err != nil {
		t.Fatal(err)
	}
	if c.Lost != 0 || execs != 400 {
		t.Fatalf("%d of 400 execs read, %d events lost, %d wake-ups: the half-full wake-up did not drain the buffer in time", execs, c.Lost, wakes)
	}
	if wakes < 2 {
		t.Fatalf("%d wake-ups for a burst of four buffers, want several", wakes)
	}
}

// launchMarked loads a lineage with opts, opens its reader and starts bash
// with script as its payload, marked; the marked processes are killed and
// the payload reaped when the test ends.
func launchMarked(t *testing.T, opts Options, script string) (*Lineage, *Reader, *exec.Cmd) {
	t.Helper()
	l, err := Load(opts)
	testenv.NeedBPF(t, err)
	rd, cmd := launchMarkedIn(t, l, script)
	return l, rd, cmd
}

// launchMarkedIn is launchMarked on a lineage already loaded (or taken); it
// closes l when the test ends.
func launchMarkedIn(t *testing.T, l *Lineage, script string) (*Reader, *exec.Cmd) {
	t.Helper()
	var b [8]byte
	rand.Read(b[:])
	mark := "gpuholdtest-" + hex.EncodeToString(b[:])
	t.Cleanup(func() { l.Close() })
	rd, err := l.NewReader()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rd.Close() })
	cmd := exec.Command("bash", "-c", script)
	cmd.Env = append(os.Environ(), "GPU_HOLD_TEST_MARK="+mark)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	self, err := proc.Self()
	if err != nil {
		t.Fatal(err)
	}
	if err := l.SetLauncher(self.PID, self.Start); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { marks.Kill(mark); cmd.Wait() })
	if err := l.SetLauncher(0, 0); err != nil {
		t.Fatal(err)
	}
	return rd, cmd
}
