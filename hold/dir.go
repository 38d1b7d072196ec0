// dir.go owns the choice of the queue directory and its checks: --dir, else
// $GPU_HOLD_DIR, else /var/lib/gpu-hold when it exists, else the user's
// state directory.
package hold

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// FleetDir is the shared queue directory of a fleet host.
const FleetDir = "/var/lib/gpu-hold"

// ResolveDir returns the queue directory to use, creating the per-user
// default when needed, and checks it is a writable directory.
func ResolveDir(flag string) (string, error) {
	dir, how := flag, "--dir"
	if dir == "" {
		if env := os.Getenv("GPU_HOLD_DIR"); env != "" {
			dir, how = env, "$GPU_HOLD_DIR"
		} else if fi, err := os.Stat(FleetDir); err == nil && fi.IsDir() {
			dir, how = FleetDir, "the fleet directory"
		} else {
			base := os.Getenv("XDG_STATE_HOME")
			if base == "" {
				home, err := os.UserHomeDir()
				if err != nil {
					return "", fmt.Errorf("no queue directory: set --dir or GPU_HOLD_DIR (no home directory: %v)", err)
				}
				base = filepath.Join(home, ".local", "state")
			}
			dir, how = filepath.Join(base, "gpu-hold"), "the user state dir"
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return "", fmt.Errorf("cannot create queue dir %s (%s): %v; set --dir or GPU_HOLD_DIR", dir, how, err)
			}
		}
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return "", fmt.Errorf("queue dir %s (%s) does not exist: create it or set --dir/GPU_HOLD_DIR to a directory", dir, how)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("queue dir %s (%s) is not a directory: point --dir or GPU_HOLD_DIR at a directory", dir, how)
	}
	if err := unix.Access(dir, unix.W_OK|unix.X_OK); err != nil {
		return "", fmt.Errorf("queue dir %s is not writable by uid %d: set GPU_HOLD_DIR or ask an admin to add you to group gpu-hold", dir, os.Getuid())
	}
	return dir, nil
}
