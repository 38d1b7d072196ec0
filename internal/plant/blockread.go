// blockread.go owns the blocked reader of the device-watch tests and bench:
// a thread of the calling (multi-threaded, Go) process asleep in read(2)
// of a device, which holds one reference to the file more than its fd slot
// for as long as it sleeps.
package plant

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// BlockRead opens path (a device whose read blocks: /dev/ptmx, which no
// one writes to here) and returns once a thread of this process sleeps in
// read(2) of it.
func BlockRead(path string) error {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return fmt.Errorf("opening %s: %w", path, err)
	}
	return BlockReadFD(fd, path)
}

// BlockReadFD returns once a thread of this process sleeps in read(2) of
// fd (what names it in errors).
func BlockReadFD(fd int, what string) error {
	go unix.Read(fd, make([]byte, 1))
	want := fmt.Sprintf("%d 0x%x ", unix.SYS_READ, fd)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		calls, _ := filepath.Glob("/proc/self/task/*/syscall")
		for _, c := range calls {
			if b, err := os.ReadFile(c); err == nil && strings.HasPrefix(string(b), want) {
				return nil
			}
		}
	}
	return fmt.Errorf("no thread of this process was asleep in read(2) of %s (fd %d) within 10s", what, fd)
}
