// resources.go owns listing the resources a queue directory has queues
// for, for the commands that look at all of them (queue, cancel, history).
package hold

import "sort"

// Resources lists the resources of queue dir dir that have a queue (a
// token or a counter), sorted.
func Resources(dir string) ([]string, error) {
	rs, err := resourceDirs(dir)
	sort.Strings(rs)
	return rs, err
}
