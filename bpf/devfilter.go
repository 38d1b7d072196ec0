// devfilter.go owns the generate step and the Go side of devfilter.bpf.c:
// loading one hold's copy, filling its deny map, attaching it to a cgroup
// and closing it.
package bpf

//go:generate go tool bpf2go -tags linux -target bpfel -cflags "-O2 -g -Wall -Werror" -type dev_key devfilter devfilter.bpf.c -- -I/usr/include/x86_64-linux-gnu -I/usr/include/aarch64-linux-gnu

import (
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// DevFilter is a device filter attached to one cgroup.
type DevFilter struct {
	objs devfilterObjects
	link link.Link
}

// AttachDevFilter loads the filter, denies every device in deny, and
// attaches it to the cgroup whose directory cgroupDir names. The filter
// stays attached while the returned DevFilter is open, or until the cgroup
// is removed.
func AttachDevFilter(cgroupDir string, deny []DevID) (_ *DevFilter, err error) {
	f := &DevFilter{}
	// Load: one copy per hold, so holds never share a deny list.
	if err := loadDevfilterObjects(&f.objs, nil); err != nil {
		return nil, fmt.Errorf("cannot load the cgroup device filter: %w", err)
	}
	defer func() {
		if err != nil {
			f.objs.Close()
		}
	}()
	// Fill the deny map before the program can run on anything.
	for _, d := range deny {
		key := devfilterDevKey{Type: d.Type, Major: d.Major, Minor: d.Minor}
		if err := f.objs.Denied.Put(&key, uint8(1)); err != nil {
			return nil, fmt.Errorf("cannot fill the device filter's deny map: %w", err)
		}
	}
	// Attach to the cgroup, alongside whatever programs it inherits.
	f.link, err = link.AttachCgroup(link.CgroupOptions{Path: cgroupDir, Attach: ebpf.AttachCGroupDevice, Program: f.objs.Devfilter})
	if err != nil {
		return nil, fmt.Errorf("cannot attach the device filter to cgroup %s: %w", cgroupDir, err)
	}
	return f, nil
}

// Close detaches and unloads the filter.
func (f *DevFilter) Close() error {
	if f == nil {
		return nil
	}
	var err error
	if f.link != nil {
		err = f.link.Close()
	}
	f.objs.Close()
	return err
}
