// exec.go owns the exec between the two images: which file, which
// environment.
package lobby

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Self is this process's executable, as the path it was started from
// (an upgrade that replaced it in place put the new file there).
func Self() (string, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return "", fmt.Errorf("cannot find this executable (%v)", err)
	}
	return strings.TrimSuffix(exe, " (deleted)"), nil
}

// Path is the lobby beside the executable self, or why there is none.
func Path(self string) (string, error) {
	p := filepath.Join(filepath.Dir(self), Binary)
	st, err := os.Stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("%s is not installed beside %s (make install and the gpu-hold package put it there): waiting holds stay full gpu-hold processes", p, self)
	case err != nil:
		return "", fmt.Errorf("cannot use %s: %v", p, err)
	case !st.Mode().IsRegular() || st.Mode()&0o111 == 0:
		return "", fmt.Errorf("%s is not an executable file", p)
	}
	return p, nil
}

// About says where this executable's waiting holds wait.
func About() string {
	self, err := Self()
	if err == nil {
		var p string
		if p, err = Path(self); err == nil {
			return "in " + p
		}
	}
	return "in full gpu-hold processes: " + err.Error()
}

// environ is this process's environment without the variables named.
func environ(drop ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		keep := true
		for _, d := range drop {
			keep = keep && name != d
		}
		if keep {
			out = append(out, kv)
		}
	}
	return out
}

// execAs replaces this image with the executable at path, same arguments.
// No signal is blocked across it: the payload inherits the signal mask of
// the image that starts it. From the exec until the new image asks for
// its signals (a millisecond or two), SIGTERM, SIGINT and SIGHUP end the
// process as they end any, with the same exit status, and SIGUSR1 is
// ignored.
func execAs(path string, env []string) error {
	return unix.Exec(path, os.Args, env)
}
