// devwatch.go owns the host's device watch (devwatch.bpf.c): loading it,
// attaching its open and fork hooks, and pinning it once per boot under
// SpareRoot, so that every later hold opens it in a few system calls. What
// the watch answers is devwatch_account.go's.
package bpf

//go:generate go tool bpf2go -tags linux -target bpfel -cflags "-O2 -g -Wall -Werror -mcpu=v3" -type dev_key -type opener_key -type dentry_info -type watch_state -type file_rec -type vma_rec -type dentry_rec devwatch devwatch.bpf.c -- -I/usr/include/x86_64-linux-gnu -I/usr/include/aarch64-linux-gnu

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
	watchLinkOpen = "link_open"
	watchLinkFork = "link_fork"
)

// Watch is the device watch: its maps and iterators, and, for a watch of
// this process's own, its hooks.
type Watch struct {
	mu    sync.Mutex
	objs  *devwatchObjects
	links []link.Link // a private watch's hooks, detached at Close
	dir   *os.File    // the pinned watch's directory: its flock orders the holds that read it
}

func devwatchPinDir() string { return filepath.Join(SpareRoot, "devwatch_"+spareBuild()) }

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
	return &Watch{objs: objs, links: links}, nil
}

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

// loadWatch loads the programs and maps and attaches the two hooks.
func loadWatch(cgroupMount string) (*devwatchObjects, []link.Link, error) {
	spec, err := loadDevwatch()
	if err != nil {
		return nil, nil, fmt.Errorf("reading the embedded device-watch BPF object: %w", err)
	}
	var objs devwatchObjects
	if err := spec.LoadAndAssign(&objs, loadOptions()); err != nil {
		return nil, nil, fmt.Errorf("loading the device watch: %w", loadError(err))
	}
	open, err := link.AttachCgroup(link.CgroupOptions{Path: cgroupMount, Attach: ebpf.AttachCGroupDevice, Program: objs.WatchOpen})
	if err != nil {
		objs.Close()
		return nil, nil, fmt.Errorf("attaching the device watch's open hook to %s: %w", cgroupMount, err)
	}
	fork, err := link.AttachTracing(link.TracingOptions{Program: objs.WatchFork})
	if err != nil {
		open.Close()
		objs.Close()
		return nil, nil, fmt.Errorf("attaching the device watch's fork hook: %w", err)
	}
	return &objs, []link.Link{open, fork}, nil
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
	m[watchLinkOpen], m[watchLinkFork] = links[0], links[1]
	return pinDir(devwatchPinDir(), m)
}

// watchPins names the maps and iterators a hold opens.
func watchPins(o *devwatchObjects) map[string]pinner {
	return map[string]pinner{
		"watched": o.Watched, "openers": o.Openers, "dentries": o.Dentries, "state": o.State,
		"account_files": o.AccountFiles, "account_vmas": o.AccountVmas, "read_dentries": o.ReadDentries,
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
	progs := map[string]**ebpf.Program{"account_files": &o.AccountFiles, "account_vmas": &o.AccountVmas, "read_dentries": &o.ReadDentries}
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
	return &Watch{objs: o, dir: d}, nil
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
