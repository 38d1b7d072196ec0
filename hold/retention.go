// retention.go owns which records are pruned and by whose rule: a hold's
// flags (--keep-records, --record-age) prune only its own user's records
// (root's hold: root's); every user's records go only by the admin's
// retention in the queue dir's settings file (internal/dirconf), applied
// by root: its holds, and gpu-hold reap (the root timer).
package hold

import (
	"os"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"

	"github.com/gpu-hold/gpu-hold/internal/dirconf"
	"github.com/gpu-hold/gpu-hold/internal/record"
)

// pruneRecords applies the hold's retention to its own records in
// recordsDir and, as root, the directory's to everyone's.
func pruneRecords(o *Options, recordsDir string) {
	uid := os.Geteuid()
	own := record.Retention{Keep: o.KeepRecords, MaxAge: o.RecordAge}
	if err := record.PruneRecords(recordsDir, uid, own); err != nil {
		o.Log.Warn().Err(err).Msg("cannot prune this user's old records")
	}
	if ret, ok := fleetRetention(o.Dir, o.Log); ok {
		pruneFleet(recordsDir, ret, o.Log)
	}
}

// PruneFleet applies the retention of queue dir dir's settings file to
// every user's records of each resource (gpu-hold reap). It does nothing
// unless this process is root and the file sets a retention.
func PruneFleet(dir string, resources []string, log zerolog.Logger) {
	ret, ok := fleetRetention(dir, log)
	if !ok {
		return
	}
	for _, res := range resources {
		pruneFleet(filepath.Dir(record.RecordPath(filepath.Join(dir, res), "x")), ret, log)
	}
}

// fleetRetention is the retention dir's settings file sets, when this
// process is root (only root removes another user's record) and the file
// sets one. A settings file that does not count (another user's, say) or
// does not parse is logged, and nothing is pruned by it.
func fleetRetention(dir string, log zerolog.Logger) (record.Retention, bool) {
	if os.Geteuid() != 0 || dir == "" {
		return record.Retention{}, false
	}
	set, err := dirconf.Load(dir)
	if err != nil {
		log.Warn().Err(err).Msg("the directory's record retention is not applied")
		return record.Retention{}, false
	}
	r := set.Records
	return record.Retention{Keep: r.Keep, MaxAge: time.Duration(r.MaxAge)}, r.Set()
}

// pruneFleet prunes every user's records in recordsDir by ret.
func pruneFleet(recordsDir string, ret record.Retention, log zerolog.Logger) {
	if err := record.PruneRecords(recordsDir, record.EveryOwner, ret); err != nil {
		log.Warn().Err(err).Msg("cannot prune old records by the directory's retention")
	}
}
