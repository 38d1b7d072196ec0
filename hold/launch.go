// launch.go owns starting the payload: its own process group, stdin from
// /dev/null, stdout and stderr passed through, born into its cgroup when
// there is one, and tracked before its first instruction runs.
package hold

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"github.com/gpu-hold/gpu-hold/internal/cgroup"
	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/tracker"
)

// LaunchError is a payload that could not be started; Code is 126 or 127.
type LaunchError struct {
	Code int
	Err  error
}

func (e *LaunchError) Error() string { return e.Err.Error() }
func (e *LaunchError) Unwrap() error { return e.Err }

// checkCommand resolves the payload before it waits in the queue, so a typo
// fails at once with 127 (not found) or 126 (not executable).
func checkCommand(name string) error {
	path, err := exec.LookPath(name)
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return &LaunchError{Code: ExitNotFound, Err: fmt.Errorf("command %q not found: check the name and $PATH", name)}
		}
		return &LaunchError{Code: ExitNotExecutable, Err: fmt.Errorf("command %q cannot be executed: %v; check its permissions", name, errors.Unwrap(err))}
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return &LaunchError{Code: ExitNotExecutable, Err: fmt.Errorf("command %q is a directory", name)}
	}
	return nil
}

// launch starts cmd under tr (and in cg when not nil) and returns the
// payload's identity.
func launch(o *Options, tr *tracker.Lineage, cg *cgroup.Cgroup, env []string) (*exec.Cmd, proc.Ident, error) {
	cmd := exec.Command(o.Cmd[0], o.Cmd[1:]...)
	cmd.Stdin = nil // os/exec connects /dev/null
	cmd.Stdout, cmd.Stderr = o.Stdout, o.Stderr
	if cmd.Stdout == nil {
		cmd.Stdout = os.Stdout
	}
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if cg != nil {
		cmd.SysProcAttr.UseCgroupFD = true
		cmd.SysProcAttr.CgroupFD = cg.FD()
	}
	if err := tr.Prepare(cmd); err != nil {
		return nil, proc.Ident{}, err
	}
	if err := cmd.Start(); err != nil {
		return nil, proc.Ident{}, startError(o.Cmd[0], err)
	}
	// Its pid is ours until it is reaped, so the stat is readable even if it
	// exited already.
	root := proc.Ident{PID: cmd.Process.Pid}
	if st, err := proc.ReadStat(cmd.Process.Pid); err == nil {
		root = st.Ident
	}
	if err := tr.Started(root); err != nil {
		// Untracked, it must not run: end it (through os/exec's pidfd) at
		// once, before it can have created anything.
		cmd.Process.Kill()
		cmd.Wait()
		return nil, root, fmt.Errorf("the payload was stopped at once: %w", err)
	}
	return cmd, root, nil
}

// startError maps an exec failure to 126/127 with a message that says what to do.
func startError(name string, err error) error {
	switch {
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, syscall.ENOENT):
		return &LaunchError{Code: ExitNotFound, Err: fmt.Errorf("command %q not found: check the name and $PATH", name)}
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.ENOEXEC), errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.EPERM):
		return &LaunchError{Code: ExitNotExecutable, Err: fmt.Errorf("command %q cannot be executed: %v; check its permissions and format", name, errors.Unwrap(err))}
	}
	return &startFailure{fmt.Errorf("cannot start %q: %w", name, err)}
}

// startFailure is a fork that failed for another reason than the command
// (a refused clone3 into the cgroup, say): nothing was started.
type startFailure struct{ error }

func (e *startFailure) Unwrap() error { return e.error }
