// textfile.go owns writing one whole textfile for another exporter of
// this project (the guard): replaced atomically in a metrics dir opened as
// Record opens it, never through another user's symlink.
package metrics

import (
	"fmt"

	"github.com/gpu-hold/gpu-hold/internal/safefs"
)

// WriteTextfile replaces dir/name with data (temp file, fsync, rename).
func WriteTextfile(dir, name string, data []byte) error {
	d, err := safefs.OpenUserDir(dir, 0)
	if err != nil {
		return fmt.Errorf("metrics dir %s: %v: create it or fix --metrics-dir", dir, err)
	}
	defer d.Close()
	return writeReplace(d, name, data)
}
