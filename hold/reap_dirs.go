// reap_dirs.go owns the making of a shared queue dir's resource dirs by
// the root sweep (gpu-hold reap --all): a user's hold may not make one
// (queue.OpenDir), since it would be that user's alone and every other
// hold would refuse it, so each declared resource (built in, or in a
// trusted resources.json) and each device of its pool gets <dir>/<res>/
// and its records/ as an admin makes them, within one timer period of
// its declaration.
package hold

import (
	"errors"
	"path/filepath"
	"sort"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/device"
	"github.com/gpu-hold/gpu-hold/internal/fleetenv"
	"github.com/gpu-hold/gpu-hold/internal/record"
	"github.com/gpu-hold/gpu-hold/internal/safefs"
	"github.com/gpu-hold/gpu-hold/queue"
)

// makeDeclaredDirs makes, in shared queue dir dir, the dirs of every
// declared resource that lacks one, when this process may: root, or the
// queue dir's owner. An empty dir of a declared name that another user
// made (a mkdir that would wedge the resource) holds no queue: it is
// removed and made anew. One that is not empty is left, with a warning
// that names the fix.
func makeDeclaredDirs(dir string, log zerolog.Logger) {
	base, err := safefs.OpenDir(dir)
	if err != nil {
		return // the sweep's listing says why
	}
	defer base.Close()
	var bst unix.Stat_t
	if unix.Fstat(base.Fd(), &bst) != nil || !fleetenv.SharedDir(dir, bst) || !mayMakeDirs(bst) {
		return
	}
	for _, name := range declaredDirs(dir) {
		st, err := base.Lstat(name)
		switch {
		case errors.Is(err, unix.ENOENT):
			makeResourceDir(base, bst, name, log)
		case err != nil:
			// Opening it says what is wrong.
		case st.UID != 0 && st.UID != bst.Uid:
			replacePlanted(base, bst, name, st, log)
		case st.IsDir():
			makeRecordsDir(base, bst, name, log)
		}
	}
}

// mayMakeDirs says whether this process makes resource dirs in a shared
// queue dir of stat bst.
func mayMakeDirs(bst unix.Stat_t) bool {
	e := uint32(unix.Geteuid())
	return e == 0 || e == bst.Uid
}

// declaredDirs names the dirs of dir's declared resources: each
// configured resource of a valid name, and its pool's device queues.
func declaredDirs(dir string) []string {
	rs, err := device.LoadResourcesWarn(dir, func(string) {}) // holds report the file
	if err != nil {
		rs = device.DefaultResources()
	}
	var out []string
	for name := range rs {
		if queue.ValidResource(name) != nil {
			continue
		}
		out = append(out, name)
		p := device.PoolOf(device.LookupResource(rs, name), "/")
		if !p.Multi() {
			continue
		}
		for _, d := range p.Devices {
			out = append(out, device.QueueName(name, d))
		}
	}
	sort.Strings(out)
	return out
}

// makeResourceDir makes resource dir name in base (of stat bst) and its
// records/, as an admin's install -d does: records/ first, while the
// resource dir is still 0700, so that no user's records/ comes first.
func makeResourceDir(base *safefs.Dir, bst unix.Stat_t, name string, log zerolog.Logger) {
	path := base.Join(name)
	if err := unix.Mkdirat(base.Fd(), name, 0o700); err != nil {
		if !errors.Is(err, unix.EEXIST) {
			log.Warn().Err(err).Str("dir", path).Msg("cannot make the declared resource's dir; users' holds on it are refused until an admin makes it")
		}
		return
	}
	d, err := base.Sub(name)
	if err != nil {
		log.Warn().Err(err).Str("dir", path).Msg("cannot open the declared resource's dir just made")
		return
	}
	defer d.Close()
	makeRecordsDir(base, bst, name, log)
	mode := 0o3775 | bst.Mode&0o002 // as the queue shares a resource dir
	if err := d.Chgrp(int(bst.Gid)); err != nil {
		log.Warn().Err(err).Str("dir", path).Msg("cannot give the declared resource's dir the queue dir's group")
	}
	if err := d.Chmod(mode); err != nil {
		log.Warn().Err(err).Str("dir", path).Msg("cannot give the declared resource's dir its mode; users' holds on it are refused until an admin runs chmod 3775 on it")
		return
	}
	log.Info().Str("dir", path).Msg("made the declared resource's dir")
}

// makeRecordsDir makes the records/ of resource dir name when missing.
func makeRecordsDir(base *safefs.Dir, bst unix.Stat_t, name string, log zerolog.Logger) {
	d, err := base.Sub(name)
	if err != nil {
		return
	}
	defer d.Close()
	rec := filepath.Base(fleetenv.RecordsDir(name))
	if _, err := d.Lstat(rec); !errors.Is(err, unix.ENOENT) {
		return
	}
	r, _, err := d.MkdirSub(rec, record.RecordsDirMode, int(bst.Gid))
	if err != nil {
		log.Warn().Err(err).Str("dir", d.Join(rec)).Msg("cannot make the resource's records dir")
		return
	}
	r.Close()
}

// replacePlanted removes what a user (st.UID) made at resource dir name
// (a symlink or file, never followed, or a dir when it is empty: it holds
// no queue) and makes the dir anew; a dir with anything in it is left,
// with the fix.
func replacePlanted(base *safefs.Dir, bst unix.Stat_t, name string, st safefs.Info, log zerolog.Logger) {
	path := base.Join(name)
	flags := 0
	if st.IsDir() {
		flags = unix.AT_REMOVEDIR
	}
	if err := unix.Unlinkat(base.Fd(), name, flags); err != nil {
		log.Warn().Err(err).Str("dir", path).Uint32("owner", st.UID).
			Msg("a declared resource's dir belongs to a user, who could remove or forge every ticket in it, so every hold refuses it: an admin removes it (rm -r " + path + "), and the next reap --all makes it anew")
		return
	}
	log.Warn().Str("dir", path).Uint32("owner", st.UID).Str("kind", st.Kind()).Msg("removed what a user made under a declared resource's name (an empty dir, a symlink or a file), which every hold would have refused")
	makeResourceDir(base, bst, name, log)
}
