// fakedev.go owns the fake device node of the device-scan tests: a
// character device of a number no driver has registered (a major of the
// local/experimental range 240-254 that /proc/devices does not list), which
// nothing can open but with O_PATH, so a holder of it is the test's own.
package plant

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/testenv"
)

// UnusedCharMajor is a character device major no driver has registered.
func UnusedCharMajor(t testing.TB) uint32 {
	t.Helper()
	data, err := os.ReadFile("/proc/devices")
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, f := range strings.Fields(string(data)) {
		used[f] = true
	}
	for m := 254; m >= 240; m-- {
		if !used[strconv.Itoa(m)] {
			return uint32(m)
		}
	}
	t.Skip("no unused character device major in 240-254")
	return 0
}

// FakeDevice makes a character device node of an unregistered number
// (major, minor) at path, and returns an O_PATH file of it to hand to a
// holder (root only).
func FakeDevice(t testing.TB, path string, minor uint32) (*os.File, uint32) {
	t.Helper()
	testenv.NeedRoot(t, "making a device node (mknod)")
	major := UnusedCharMajor(t)
	if err := unix.Mknod(path, unix.S_IFCHR|0o600, int(unix.Mkdev(major, minor))); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	return os.NewFile(uintptr(fd), path), major
}
