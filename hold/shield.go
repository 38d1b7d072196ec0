// shield.go owns keeping a payload's hands off its own hold. A payload runs
// as the hold's user, and the kernel lets a process ptrace another of its
// uid unless that one is not dumpable (or YAMA forbids it): a payload could
// then clear the hold's child-subreaper flag, so its orphans go to init
// unseen, or write the hold's memory. A non-dumpable hold is out of its
// reach; exec makes the payload dumpable again.
package hold

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// shield makes this process non-dumpable.
func shield() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("cannot make gpu-hold non-dumpable (prctl PR_SET_DUMPABLE: %v): its payload could ptrace it; this kernel is unusual, report it", err)
	}
	return nil
}
