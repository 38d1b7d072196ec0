// devices_test.go checks what the device check's choice between the
// kernel and a walk of /proc reads: the host's task count.
package tracker

import "testing"

func TestHostTasksReadsLoadavg(t *testing.T) {
	n := hostTasks()
	if n <= 0 || n >= 1<<30 {
		t.Fatalf("hostTasks() = %d: /proc/loadavg's task count was not read", n)
	}
}
