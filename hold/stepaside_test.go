// stepaside_test.go checks that a released hold lowers every one of its
// threads, in a child process (the test binary itself) so that the tests
// beside it keep their priority.
package hold

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	marks "github.com/gpu-hold/gpu-hold/internal/mark"
	"github.com/gpu-hold/gpu-hold/internal/proc"
)

const stepAsideChild = "GPU_HOLD_TEST_STEP_ASIDE"

// Catches: a step aside that lowers the calling thread alone (the runtime
// runs the hold's remaining work on any of its threads), or none.
func TestStepAsideLowersEveryThread(t *testing.T) {
	if os.Getenv(stepAsideChild) == "1" {
		stepAside()
		tids, err := proc.Threads(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		for _, tid := range tids {
			prio, err := unix.Getpriority(unix.PRIO_PROCESS, tid)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Printf("thread %d nice %d\n", tid, 20-prio) // the raw call returns 20 - nice
		}
		return
	}
	mark := marks.New()
	t.Cleanup(func() { marks.Kill(mark) })
	cmd := exec.Command(os.Args[0], "-test.run=^TestStepAsideLowersEveryThread$", "-test.count=1")
	cmd.Env = append(os.Environ(), stepAsideChild+"=1", marks.Env+"="+mark)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	threads := 0
	for _, l := range strings.Split(string(out), "\n") {
		var tid, nice int
		if n, _ := fmt.Sscanf(l, "thread %d nice %d", &tid, &nice); n != 2 {
			continue
		}
		threads++
		if nice != asideNice {
			t.Errorf("thread %d of the child runs at nice %d, want %d", tid, nice, asideNice)
		}
	}
	if threads < 2 {
		t.Fatalf("test shape: the child reported %d threads, want the Go runtime's several:\n%s", threads, out)
	}
}
