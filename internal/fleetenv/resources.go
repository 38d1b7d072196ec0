// resources.go owns which resources a queue directory knows: those it has
// queues for (queue, cancel, history), the check of the -r a read-only
// command was given, and the stricter check of a hold's, which in a shared
// queue dir takes only a declared resource: a hold on a name nobody else
// queues for runs at once, beside the holders of the name that was meant.
package fleetenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/device"
	"github.com/gpu-hold/gpu-hold/internal/suggest"
	"github.com/gpu-hold/gpu-hold/queue"
)

// Resources lists the resources of queue dir dir that have a queue (a
// token or a counter), sorted; none when dir does not exist yet (nobody
// has queued).
func Resources(dir string) ([]string, error) {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	rs, err := ResourceDirs(dir)
	sort.Strings(rs)
	return rs, err
}

// KnownResource returns nil when name is a resource of queue dir dir (one
// configured, by default or in resources.json, or one with a directory
// there, whoever made it: a read shows it), else an error that lists the
// known ones.
func KnownResource(dir, name string) error {
	configured, _ := configuredResources(dir) // names only: holds report the file
	known := configured
	for res := range resourceDirOwners(dir) {
		known = append(known, res)
	}
	known = sortedSet(known)
	if slices.Contains(known, name) {
		return nil
	}
	return fmt.Errorf("resource %q is unknown in queue dir %s%s known resources are %s (check -r, or add it to %s)",
		name, dir, sentenceEnd(suggest.DidYouMean(name, known)), strings.Join(known, ", "), filepath.Join(dir, device.ResourcesFile))
}

// HoldResource checks the resource a hold was given, before it queues or
// creates anything: a valid name and, in a shared queue dir (SharedDir),
// a declared one: built in, in a trusted resources.json, or a resource dir
// that root or the queue dir's owner made. A dir an ordinary user made
// declares nothing (that user's hold on a typo made it). Mapping a near
// miss to the name it resembles would be a guess, so it is refused with
// the suggestion. In a private dir, which its owner alone uses, any valid
// name queues.
func HoldResource(dir, name string) error {
	if err := queue.ValidResource(name); err != nil {
		configured, _ := configuredResources(dir)
		return fmt.Errorf("%v%s", err, suggest.DidYouMean(name, configured))
	}
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil || !SharedDir(dir, st) {
		return nil // a dir that cannot be stat'ed: opening the queue says why
	}
	declared, err := configuredResources(dir)
	if err != nil {
		return err
	}
	owners := resourceDirOwners(dir)
	for res, uid := range owners {
		if uid == 0 || uid == st.Uid {
			declared = append(declared, res)
		}
	}
	declared = sortedSet(declared)
	if slices.Contains(declared, name) {
		return nil
	}
	return undeclaredError(dir, name, st, declared, owners)
}

// undeclaredError says that name is not declared in shared queue dir dir
// (of stat st), what is, and how an admin declares it.
func undeclaredError(dir, name string, st unix.Stat_t, declared []string, owners map[string]uint32) error {
	path := filepath.Join(dir, name)
	var theirs string
	if uid, ok := owners[name]; ok {
		theirs = fmt.Sprintf(" (%s exists but belongs to uid %d, and a directory a user made declares nothing)", path, uid)
	}
	return fmt.Errorf("resource %q is not declared in shared queue dir %s%s declared resources are %s%s; a hold on an undeclared name would run at once, beside the holders of the one meant, so nothing was queued: check -r, or ask an admin to declare it (in %s, or: %s)",
		name, dir, sentenceEnd(suggest.DidYouMean(name, declared)), strings.Join(declared, ", "), theirs,
		filepath.Join(dir, device.ResourcesFile), installDirs(dirGroup(st), path, RecordsDir(path)))
}

// sentenceEnd ends the sentence before a list: with the suggestion when
// there is one, else with a colon.
func sentenceEnd(didYouMean string) string {
	if didYouMean == "" {
		return ":"
	}
	return didYouMean
}

// configuredResources names the resources of dir's configuration: the
// built-in ones and those of a trusted resources.json (an untrusted one is
// ignored, as holds ignore it). On an error (a trusted file that cannot be
// read or parsed), the built-in ones and the error.
func configuredResources(dir string) ([]string, error) {
	res, err := device.LoadResourcesWarn(dir, func(string) {}) // holds report the file
	if err != nil {
		res = device.DefaultResources()
	}
	names := make([]string, 0, len(res))
	for k := range res {
		names = append(names, k)
	}
	sort.Strings(names)
	return names, err
}

// resourceDirOwners maps each resource dir in dir (a real directory,
// never a symlink, with a valid name) to its owner's uid.
func resourceDirOwners(dir string) map[string]uint32 {
	out := map[string]uint32{}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if !e.IsDir() || queue.ValidResource(e.Name()) != nil {
			continue
		}
		if fi, err := e.Info(); err == nil && fi.IsDir() {
			out[e.Name()] = fi.Sys().(*syscall.Stat_t).Uid
		}
	}
	return out
}

// sortedSet sorts s and drops its repeats.
func sortedSet(s []string) []string {
	sort.Strings(s)
	return slices.Compact(s)
}

// ResourceDirs lists the resources of queue dir dir: its subdirectories
// that hold a queue (a token or a counter).
func ResourceDirs(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("cannot list the resources of %s: %v", dir, err)
	}
	var out []string
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		for _, f := range []string{"token", "seq"} {
			if st, err := os.Lstat(filepath.Join(dir, e.Name(), f)); err == nil && st.Mode().IsRegular() {
				out = append(out, e.Name())
				break
			}
		}
	}
	return out, nil
}
