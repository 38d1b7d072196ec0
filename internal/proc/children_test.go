// children_test.go checks the reads of the kernel's children lists: a
// child forked by any thread of a process is among its children, and a
// descent from them finds what a walk of /proc finds below the process.
package proc_test

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	marks "github.com/gpu-hold/gpu-hold/internal/mark"
	"github.com/gpu-hold/gpu-hold/internal/proc"
)

// startMarked starts argv carrying mark, and reaps it in the background.
func startMarked(t *testing.T, mark string, argv ...string) int {
	t.Helper()
	pid, err := spawn(mark, argv...)
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// spawn is startMarked for a goroutine other than the test's.
func spawn(mark string, argv ...string) (int, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), marks.Env+"="+mark)
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	go cmd.Wait()
	return cmd.Process.Pid, nil
}

// Catches: a read of the main thread's list alone (a child forked by
// another thread is on that thread's list, and the hold forks from any).
func TestChildrenOfEveryThread(t *testing.T) {
	mark := marks.New()
	t.Cleanup(func() { marks.Kill(mark) })
	fromMain := startMarked(t, mark, "sleep", "300")
	pid, release := startOffMain(t, mark)
	defer release()
	kids, err := proc.Children(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []int{fromMain, pid} {
		if !slices.Contains(kids, want) {
			t.Errorf("Children(self) = %v: want %d among them", kids, want)
		}
	}
}

// startOffMain starts a marked sleep from a thread other than the main
// one, and keeps that thread until release: a thread that exits hands its
// children to another. A goroutine that lands on the main thread keeps it
// locked, so that the next cannot.
func startOffMain(t *testing.T, mark string) (pid int, release func()) {
	t.Helper()
	done := make(chan struct{})
	got := make(chan int)
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			pid := 0
			if unix.Gettid() != os.Getpid() {
				var err error
				pid, err = spawn(mark, "sleep", "300")
				errs <- err
			}
			got <- pid
			<-done
		}()
		if pid = <-got; pid != 0 {
			return pid, func() { close(done) }
		}
	}
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	t.Fatal("test shape: eight goroutines in a row ran on the main thread")
	return 0, nil
}

// Catches: a descent that stops at the first level, or that loses a
// process's parent: a grandchild is below its parent, as a walk says.
func TestSnapshotFromDescends(t *testing.T) {
	mark := marks.New()
	t.Cleanup(func() { marks.Kill(mark) })
	parent := startMarked(t, mark, "bash", "-c", "sleep 300 & wait")
	self := os.Getpid()
	var below *proc.Snapshot
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		top, err := proc.Children(self)
		if err != nil {
			t.Fatal(err)
		}
		below = proc.SnapshotFrom(top)
		// The grandchild past its exec and both marked: inside its exec
		// it has no environment to read.
		if kids := below.Children[parent]; len(kids) > 0 && below.ByPID[kids[0]].Comm == "sleep" && len(descendants(below, self, mark)) == 2 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("no marked child of %d below the test after 10 s: %v", parent, below.Children)
		}
	}
	walked, err := proc.TakeSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	want := descendants(walked, self, mark)
	got := descendants(below, self, mark)
	if len(want) != 2 || !slices.Equal(got, want) {
		t.Errorf("below the test, marked: descent %v, walk %v; want the same two", got, want)
	}
	if st := below.ByPID[parent]; st.PPID != self {
		t.Errorf("descent has %d's parent as %d, want %d", parent, st.PPID, self)
	}
}

// descendants lists the marked pids below pid in s, sorted.
func descendants(s *proc.Snapshot, pid int, mark string) []int {
	var out []int
	s.Descend([]int{pid}, func(st proc.Stat) bool {
		if marks.Carries(st.PID, mark) {
			out = append(out, st.PID)
		}
		return true
	})
	slices.Sort(out)
	return out
}

const offMainChild = "GPU_HOLD_TEST_OFF_MAIN_CHILD"

// Catches: a descent that reads a threaded process's main thread alone:
// a grandchild forked by another of its threads is on that thread's list.
func TestSnapshotFromThreadedChild(t *testing.T) {
	if os.Getenv(offMainChild) == "1" {
		// The child: a sleep forked from a thread other than the main one,
		// kept alive, then wait to be killed.
		pid, release := startOffMain(t, os.Getenv(marks.Env))
		defer release()
		fmt.Println("grandchild", pid)
		time.Sleep(time.Hour)
		return
	}
	mark := marks.New()
	t.Cleanup(func() { marks.Kill(mark) })
	cmd := exec.Command(os.Args[0], "-test.run=^TestSnapshotFromThreadedChild$", "-test.count=1", "-test.timeout=2h")
	cmd.Env = append(os.Environ(), offMainChild+"=1", marks.Env+"="+mark)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go cmd.Wait()
	var grandchild int
	if _, err := fmt.Fscanf(out, "grandchild %d\n", &grandchild); err != nil {
		t.Fatalf("the child said nothing of its grandchild: %v", err)
	}
	top, err := proc.Children(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	s := proc.SnapshotFrom(top)
	if st, ok := s.ByPID[grandchild]; !ok || st.PPID != cmd.Process.Pid {
		t.Errorf("the descent has the grandchild %d as %+v (found %v), want it below the child %d", grandchild, st, ok, cmd.Process.Pid)
	}
}
