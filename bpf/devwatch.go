// devwatch.go owns the host's device watch (devwatch.bpf.c): loading it,
// attaching its hooks, and pinning it once per boot under
// SpareRoot, so that every later hold opens it in a few system calls. What
// the watch answers is devwatch_account.go's.
package bpf

//go:generate go tool bpf2go -tags linux -target bpfel -cflags "-O2 -g -Wall -Werror -mcpu=v3" -type dev_key -type opener_key -type dentry_info -type watch_state -type file_rec -type vma_rec -type dentry_rec -type thread_rec devwatch devwatch.bpf.c -- -I/usr/include/x86_64-linux-gnu -I/usr/include/aarch64-linux-gnu

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// Pin names inside the watch's directory.
const (
	watchLinkOpen    = "link_open"
	watchLinkFork    = "link_fork"
	watchLinkInstall = "link_install" // with link_replace: the install hooks, where fentry is allowed
	watchLinkReplace = "link_replace"
)

// Watch is the device watch: its maps and iterators, and, for a watch of
// this process's own, its hooks.
type Watch struct {
	mu    sync.Mutex
	objs  *devwatchObjects
	links []link.Link // a private watch's hooks, detached at Close
	dir   *os.File    // the pinned watch's directory: its flock orders the holds that read it
	// installs: the fd_install and replace_fd hooks are attached, so the
	// account may credit sleeping calls (devwatch_inflight.go).
	installs bool
}

// CreditsCalls reports whether the watch credits the references of its
// openers' sleeping calls (it does where the kernel allows fentry).
func (w *Watch) CreditsCalls() bool { return w.installs }

func devwatchPinDir() string { return filepath.Join(SpareRoot(), "devwatch_"+spareBuild()) }

// WatchPinned reports whether the host's watch is attached and pinned.
func WatchPinned() bool {
	_, err := os.Stat(filepath.Join(devwatchPinDir(), watchLinkOpen))
	return err == nil
}

// OpenWatch opens the host's watch, attaching and pinning it first when it
// is not there. cgroupMount is the cgroup v2 hierarchy's root, where the
// open hook is attached.
func OpenWatch(cgroupMount string) (*Watch, error) {
	if w, err := openPinnedWatch(); err == nil {
		return w, nil
	}
	if _, err := openSpareRoot(); err != nil {
		return nil, err
	}
	if err := pinWatch(cgroupMount); err != nil {
		return nil, err
	}
	return openPinnedWatch()
}

// NewPrivateWatch loads and attaches a watch of this process's own, which
// Close detaches: tests and the bench, which must not share the host's.
func NewPrivateWatch(cgroupMount string) (*Watch, error) {
	objs, links, err := loadWatch(cgroupMount)
	if err != nil {
		return nil, err
	}
	return &Watch{objs: objs, links: links, installs: len(links) == len(watchLinks)}, nil
}

// watchLinks are the pin names of the hooks, in the order loadWatch
// attaches them; the last two are optional.
var watchLinks = []string{watchLinkOpen, watchLinkFork, watchLinkInstall, watchLinkReplace}

// Close closes this process's handles (and a private watch's hooks).
func (w *Watch) Close() error {
	errs := []error{w.objs.Close()}
	for _, l := range w.links {
		errs = append(errs, l.Close())
	}
	if w.dir != nil {
		errs = append(errs, w.dir.Close())
	}
	return errors.Join(errs...)
}

// loadWatch loads the programs and maps and attaches the hooks: open and
// fork, then fd_install and replace_fd where the kernel allows fentry (the
// links returned then number len(watchLinks)).
func loadWatch(cgroupMount string) (*devwatchObjects, []link.Link, error) {
	spec, err := loadDevwatch()
	if err != nil {
		return nil, nil, fmt.Errorf("reading the embedded device-watch BPF object: %w", err)
	}
	var core struct {
		devwatchMaps
		watchCoreProgs
	}
	if err := spec.LoadAndAssign(&core, loadOptions()); err != nil {
		return nil, nil, fmt.Errorf("loading the device watch: %w", loadError(err))
	}
	objs := &devwatchObjects{devwatchMaps: core.devwatchMaps, devwatchPrograms: core.programs()}
	links, err := attachWatch(objs, cgroupMount)
	if err != nil {
		objs.Close()
		return nil, nil, err
	}
	if inst := loadInstalls(spec, objs); inst != nil {
		links = append(links, inst...)
	}
	return objs, links, nil
}

// watchCoreProgs are the programs every watch has: all but the install
// hooks.
type watchCoreProgs struct {
	AccountFiles   *ebpf.Program `ebpf:"account_files"`
	AccountThreads *ebpf.Program `ebpf:"account_threads"`
	AccountVmas    *ebpf.Program `ebpf:"account_vmas"`
	ReadDentries   *ebpf.Program `ebpf:"read_dentries"`
	WatchFork      *ebpf.Program `ebpf:"watch_fork"`
	WatchOpen      *ebpf.Program `ebpf:"watch_open"`
}

func (c watchCoreProgs) programs() devwatchPrograms {
	return devwatchPrograms{
		AccountFiles: c.AccountFiles, AccountThreads: c.AccountThreads, AccountVmas: c.AccountVmas,
		ReadDentries: c.ReadDentries, WatchFork: c.WatchFork, WatchOpen: c.WatchOpen,
	}
}

// attachWatch attaches the open and fork hooks, both or none.
func attachWatch(objs *devwatchObjects, cgroupMount string) ([]link.Link, error) {
	open, err := link.AttachCgroup(link.CgroupOptions{Path: cgroupMount, Attach: ebpf.AttachCGroupDevice, Program: objs.WatchOpen})
	if err != nil {
		return nil, fmt.Errorf("attaching the device watch's open hook to %s: %w", cgroupMount, err)
	}
	fork, err := link.AttachTracing(link.TracingOptions{Program: objs.WatchFork})
	if err != nil {
		open.Close()
		return nil, fmt.Errorf("attaching the device watch's fork hook: %w", err)
	}
	return []link.Link{open, fork}, nil
}

// loadInstalls loads and attaches the fd_install and replace_fd hooks on
// objs' maps, both or none (nil: the kernel refused fentry, and the watch
// works without them, crediting no sleeping call).
func loadInstalls(spec *ebpf.CollectionSpec, objs *devwatchObjects) []link.Link {
	var inst struct {
		WatchInstall *ebpf.Program `ebpf:"watch_install"`
		WatchReplace *ebpf.Program `ebpf:"watch_replace"`
	}
	opts := *loadOptions()
	opts.MapReplacements = map[string]*ebpf.Map{
		"watched": objs.Watched, "openers": objs.Openers, "dentries": objs.Dentries, "state": objs.State,
	}
	if err := spec.LoadAndAssign(&inst, &opts); err != nil {
		return nil
	}
	var links []link.Link
	for _, p := range []*ebpf.Program{inst.WatchInstall, inst.WatchReplace} {
		l, err := link.AttachTracing(link.TracingOptions{Program: p})
		if err != nil {
			break
		}
		links = append(links, l)
	}
	objs.WatchInstall, objs.WatchReplace = inst.WatchInstall, inst.WatchReplace
	if len(links) < 2 {
		for _, l := range links {
			l.Close()
		}
		return nil
	}
	return links
}

// pinWatch attaches a watch and pins it for the host; the pins keep its
// hooks attached. Two holds that race both attach, and the one whose
// directory lands second detaches its own (pinDir).
func pinWatch(cgroupMount string) error {
	objs, links, err := loadWatch(cgroupMount)
	if err != nil {
		return err
	}
	defer objs.Close()
	defer func() {
		for _, l := range links {
			l.Close()
		}
	}()
	m := watchPins(objs)
	for i, l := range links {
		m[watchLinks[i]] = l
	}
	return pinDir(devwatchPinDir(), m)
}

// watchPins names the maps and iterators a hold opens.
func watchPins(o *devwatchObjects) map[string]pinner {
	return map[string]pinner{
		"watched": o.Watched, "openers": o.Openers, "dentries": o.Dentries, "state": o.State,
		"account_files": o.AccountFiles, "account_vmas": o.AccountVmas, "read_dentries": o.ReadDentries,
		"account_threads": o.AccountThreads,
	}
}

// openPinnedWatch opens the host's pinned watch, whole or not at all.
func openPinnedWatch() (*Watch, error) {
	if _, err := spareNames(); err != nil {
		return nil, err // SpareRoot missing, or writable by others than root
	}
	dir := devwatchPinDir()
	if !WatchPinned() {
		return nil, fmt.Errorf("no device watch pinned at %s", dir)
	}
	o := &devwatchObjects{}
	maps := map[string]**ebpf.Map{"watched": &o.Watched, "openers": &o.Openers, "dentries": &o.Dentries, "state": &o.State}
	progs := map[string]**ebpf.Program{
		"account_files": &o.AccountFiles, "account_vmas": &o.AccountVmas, "read_dentries": &o.ReadDentries,
		"account_threads": &o.AccountThreads,
	}
	var errs []error
	for name, m := range maps {
		var err error
		*m, err = ebpf.LoadPinnedMap(filepath.Join(dir, name), nil)
		errs = append(errs, err)
	}
	for name, p := range progs {
		var err error
		*p, err = ebpf.LoadPinnedProgram(filepath.Join(dir, name), nil)
		errs = append(errs, err)
	}
	d, err := os.Open(dir)
	if err = errors.Join(append(errs, err)...); err != nil {
		o.Close()
		if d != nil {
			d.Close()
		}
		return nil, fmt.Errorf("opening the device watch pinned at %s: %w (remove the directory: the next hold pins a new one)", dir, err)
	}
	_, err = os.Stat(filepath.Join(dir, watchLinkReplace))
	return &Watch{objs: o, dir: d, installs: err == nil}, nil
}

// lock orders the readers of the watch: host-wide through the pinned
// directory's flock, within the process through mu.
func (w *Watch) lock() (unlock func(), err error) {
	w.mu.Lock()
	if w.dir == nil {
		return w.mu.Unlock, nil
	}
	if err := unix.Flock(int(w.dir.Fd()), unix.LOCK_EX); err != nil {
		w.mu.Unlock()
		return nil, fmt.Errorf("locking the device watch: %w", err)
	}
	return func() {
		unix.Flock(int(w.dir.Fd()), unix.LOCK_UN)
		w.mu.Unlock()
	}, nil
}
