// resources.go owns listing the resources a queue directory has queues
// for, for the commands that look at all of them (queue, cancel, history).
package hold

import (
	"errors"
	"os"
	"sort"
)

// Resources lists the resources of queue dir dir that have a queue (a
// token or a counter), sorted; none when dir does not exist yet (nobody
// has queued).
func Resources(dir string) ([]string, error) {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	rs, err := resourceDirs(dir)
	sort.Strings(rs)
	return rs, err
}
