//go:build !etcd

// fleet_exec.go owns gpu-hold's way to the fleet queue: gpu-hold does not
// link the etcd client (the package init of its grpc stack alone would
// cost every hold milliseconds before main), so when the flags select
// etcd it replaces itself with gpu-hold-fleet from its own directory,
// with the same arguments and environment, before it has made anything.
package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/hold"
)

func init() {
	fleet = fleetBackend{
		early: execFleet,
		resolve: func(g *globalOpts) (*hold.Fleet, error) {
			if err := notEtcd(&g.Fleet); err != nil {
				return nil, err
			}
			return nil, execFleet()
		},
		about:  aboutFleet,
		refuse: notEtcd,
	}
}

// notEtcd refuses a queue that is no etcd URL here, rather than after an
// exec into a gpu-hold-fleet that may not even be installed.
func notEtcd(f *fleetOpts) error {
	if spec := f.spec(); spec != "" && !strings.HasPrefix(spec, etcdScheme) {
		return usageErr("queue %q is not an etcd URL: use %sHOST:PORT[,HOST:PORT...]/PREFIX for the fleet queue, or --dir for a queue directory", spec, etcdScheme)
	}
	return nil
}

// selected names the flags that select the fleet queue, for errors.
const selectedBy = "--queue etcd://..., $" + QueueEnv + " or --etcd-config"

// execFleet replaces this process with gpu-hold-fleet; it returns only
// with the error that says why it could not.
func execFleet() error {
	target, self, err := fleetPath()
	if err == nil {
		err = fleetUsable(target, self)
	}
	if err == nil {
		err = unix.Exec(target, os.Args, os.Environ())
		err = fmt.Errorf("cannot run %s: %v", target, err)
	}
	return usageErr("the fleet queue (%s) is served by %s, the build of gpu-hold with the etcd client: %v", selectedBy, fleetBinary, err)
}

// fleetPath is gpu-hold-fleet beside this executable, and this executable.
func fleetPath() (target, self string, err error) {
	self, err = os.Readlink("/proc/self/exe")
	if err != nil {
		return "", "", fmt.Errorf("cannot find this executable to look beside it (%v)", err)
	}
	// Replaced in place by an upgrade: the new files are at the old path.
	self = strings.TrimSuffix(self, " (deleted)")
	return filepath.Join(filepath.Dir(self), fleetBinary), self, nil
}

// fleetUsable refuses a target that is missing, or that is this very
// build (a gpu-hold copied or linked to the fleet name would exec itself
// for ever).
func fleetUsable(target, self string) error {
	if filepath.Base(self) == fleetBinary {
		return fmt.Errorf("%s was built without it (go build -tags etcd): reinstall it (make install, or the gpu-hold package)", self)
	}
	st, err := os.Stat(target)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s is not installed: install it next to %s (make install and the gpu-hold package put both there), or drop the fleet queue's flags to use the queue directory", target, self)
	}
	if err != nil {
		return err
	}
	if me, err := os.Stat(self); err == nil && os.SameFile(st, me) {
		return fmt.Errorf("%s is this gpu-hold, built without the etcd client: reinstall it (make install, or the gpu-hold package)", target)
	}
	return nil
}

// aboutFleet says whether gpu-hold-fleet is there to serve the fleet queue.
func aboutFleet() string {
	target, self, err := fleetPath()
	if err == nil {
		err = fleetUsable(target, self)
	}
	if err != nil {
		return "not usable: " + err.Error()
	}
	return "served by " + target
}
