// waitfree_test.go tests WaitFree, the unbounded wait of a hold that keeps
// its token while the device is held: a holder that closes the node
// without exiting, one that passes it to a child and closes its own copy,
// and the end of its context.
package device

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/mark"
	"github.com/gpu-hold/gpu-hold/internal/proc"
)

// scriptHolder starts a marked bash running body with path open as fd 3;
// $D is a scratch dir with a FIFO, $D/go, that the body reads to wait for
// the test (a read blocks in bash itself: no child of it ever has the
// node, as a forked one would). It returns its identity and the scratch
// dir; whatever carries its mark is killed when the test ends.
func scriptHolder(t *testing.T, path, body string) (proc.Ident, string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := mark.New()
	t.Cleanup(func() { mark.Kill(m) })
	d := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(d, "go"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-c", body)
	cmd.Env = append(os.Environ(), mark.Env+"="+m, "D="+d)
	cmd.ExtraFiles = []*os.File{f}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go cmd.Wait()
	waitExists(t, filepath.Join(d, "ready"))
	st, err := proc.ReadStat(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	return st.Ident, d
}

// waitExists waits (a bound for "did not hang") for path to exist.
func waitExists(t *testing.T, path string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", path)
		}
	}
}

// waitFreeAsync runs WaitFree in the background; its result comes on the
// channel, and every changed call on the other.
func waitFreeAsync(ctx context.Context, dev string, held []Holder) (<-chan error, <-chan []Holder) {
	done := make(chan error, 1)
	changes := make(chan []Holder, 16)
	go func() {
		left, err := WaitFree(ctx, []string{dev}, nil, held, func(now []Holder) { changes <- now })
		if err == nil && len(left) > 0 {
			err = errors.New("holders left without an error")
		}
		done <- err
	}()
	return done, changes
}

// A holder that closes the node and lives on: no pidfd says so, the
// re-read of its fd table does.
//
// Catches: a wait that only watches exits (it never ends).
func TestWaitFreeHolderClosesWithoutExiting(t *testing.T) {
	dev := fakeDevice(t)
	id, d := scriptHolder(t, dev, `: > "$D/ready"; read -r _ < "$D/go"; exec 3<&-; : > "$D/closed"; exec sleep 300`)
	hs, err := ScanHolders([]string{dev})
	if err != nil || len(hs) != 1 || hs[0].Ident != id {
		t.Fatalf("scan: %+v %v, want %v", hs, err, id)
	}
	done, _ := waitFreeAsync(context.Background(), dev, hs)
	select {
	case err := <-done:
		t.Fatalf("WaitFree returned (%v) while %v held the device", err, id)
	case <-time.After(2 * keepRecheck):
	}
	os.WriteFile(filepath.Join(d, "go"), []byte("\n"), 0o644)
	waitExists(t, filepath.Join(d, "closed"))
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("WaitFree did not end once the holder closed the node")
	}
	if !proc.Alive(id) {
		t.Errorf("the holder %v is gone: the test meant it to live on", id)
	}
}

// A holder that forks a child (which inherits the node) and closes its own
// copy: the device changed hands, and the wait goes on for the child.
//
// Catches: a wait that ends when the holders it was given let go, without
// a full scan; no report of the new holder.
func TestWaitFreeFollowsTheDevice(t *testing.T) {
	dev := fakeDevice(t)
	_, d := scriptHolder(t, dev, `: > "$D/ready"; read -r _ < "$D/go"
sleep 300 & c=$!; exec 3<&-; echo $c > "$D/child.tmp"; mv "$D/child.tmp" "$D/child"; exec sleep 300`)
	hs, err := ScanHolders([]string{dev})
	if err != nil || len(hs) != 1 {
		t.Fatalf("scan: %+v %v", hs, err)
	}
	done, changes := waitFreeAsync(context.Background(), dev, hs)
	os.WriteFile(filepath.Join(d, "go"), []byte("\n"), 0o644)
	waitExists(t, filepath.Join(d, "child"))
	b, _ := os.ReadFile(filepath.Join(d, "child"))
	child, err := strconv.Atoi(string(b[:len(b)-1]))
	if err != nil {
		t.Fatal(err)
	}
	// Parent and child hold it together for a moment (from the fork to
	// the parent's close): a change may show both before the child alone.
	var now []Holder
	for len(now) != 1 || now[0].PID != child {
		select {
		case now = <-changes:
		case err := <-done:
			t.Fatalf("WaitFree returned (%v) while the holder's child %d held the device", err, child)
		case <-time.After(30 * time.Second):
			t.Fatalf("the device changed hands to the child %d and WaitFree never said so (last: %+v)", child, now)
		}
	}
	cid := now[0].Ident
	ph, err := proc.Open(cid)
	if err != nil {
		t.Fatal(err)
	}
	defer ph.Close()
	if err := ph.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("WaitFree did not end once the child exited")
	}
}

// Its context's end ends the wait, with the holders left and the error.
func TestWaitFreeContext(t *testing.T) {
	dev := fakeDevice(t)
	_, id := holdOpen(t, dev)
	hs, err := ScanHolders([]string{dev})
	if err != nil || len(hs) != 1 {
		t.Fatalf("scan: %+v %v", hs, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	left, err := WaitFree(ctx, []string{dev}, nil, hs, nil)
	if !errors.Is(err, context.Canceled) || len(left) != 1 || left[0].Ident != id {
		t.Fatalf("cancelled: want %v left and context.Canceled, got %+v, %v", id, left, err)
	}
}
