// cmdline.go owns reading a process's argv from /proc/PID/cmdline (a live
// thread's, when the main thread has exited), bounded.
package proc

import "bytes"

// Cmdline returns at most maxArgs arguments of pid's argv, each cut to
// maxLen bytes. It returns nil when the process is gone or has no argv.
func Cmdline(pid, maxArgs, maxLen int) []string {
	b, err := ReadFile(pid, "cmdline")
	if err != nil || len(b) == 0 {
		return nil
	}
	b = bytes.TrimRight(b, "\x00")
	var argv []string
	for _, a := range bytes.Split(b, []byte{0}) {
		if len(argv) == maxArgs {
			argv = append(argv, "...")
			break
		}
		if len(a) > maxLen {
			a = append(a[:maxLen:maxLen], "..."...)
		}
		argv = append(argv, string(a))
	}
	return argv
}
