// walk.go owns the /proc walk: one pass over the numeric entries of /proc,
// reading only each process's stat file.
package proc

import (
	"os"
	"strconv"
)

// Walk calls fn with the stat of every process in /proc. Processes that vanish
// mid-walk are skipped. It reads /proc in large batches and nothing but stat.
func Walk(fn func(Stat)) error {
	d, err := os.Open("/proc")
	if err != nil {
		return err
	}
	defer d.Close()
	for {
		names, err := d.Readdirnames(4096)
		for _, name := range names {
			if name == "" || name[0] < '0' || name[0] > '9' {
				continue
			}
			pid, perr := strconv.Atoi(name)
			if perr != nil {
				continue
			}
			st, serr := ReadStat(pid)
			if serr != nil {
				continue
			}
			fn(st)
		}
		if err != nil || len(names) == 0 {
			return nil
		}
	}
}
