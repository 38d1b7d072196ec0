// task.go owns reading the per-process files of /proc (environ, cmdline,
// exe, fd) for a process whose main thread has exited while its other
// threads run: the main thread's copies are then empty or gone, and a live
// thread's copies, under /proc/PID/task/TID, are read instead.
package proc

import (
	"os"
	"strconv"
)

// LiveThread returns a thread id of pid other than the main thread's, or
// 0 when it has none: exited threads other than the main one are released
// at once, so the ones listed are alive (or just exiting).
func LiveThread(pid int) int {
	d, err := os.Open("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return 0
	}
	defer d.Close()
	for {
		names, err := d.Readdirnames(16)
		for _, name := range names {
			if tid, err := strconv.Atoi(name); err == nil && tid != pid {
				return tid
			}
		}
		if err != nil || len(names) == 0 {
			return 0
		}
	}
}

// Dir is the directory to read the process's own files from: /proc/PID,
// or a live thread's /proc/PID/task/TID when the main thread has exited
// while others run.
func (s Stat) Dir() string {
	dir := "/proc/" + strconv.Itoa(s.PID)
	if s.State != 'Z' || s.Dead() {
		return dir
	}
	if tid := LiveThread(s.PID); tid != 0 {
		return dir + "/task/" + strconv.Itoa(tid)
	}
	return dir
}

// ReadFile reads /proc/PID/name; when that comes back empty or unreadable,
// as it does for a process whose main thread has exited, it reads a live
// thread's copy instead.
func ReadFile(pid int, name string) ([]byte, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/" + name)
	if len(b) > 0 {
		return b, nil
	}
	if tid := LiveThread(pid); tid != 0 {
		if tb, terr := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(tid) + "/" + name); terr == nil {
			return tb, nil
		}
	}
	return b, err
}
