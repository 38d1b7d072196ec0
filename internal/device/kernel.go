// kernel.go owns the device-holder check's fast path: a Finder asks the
// kernel which processes have one of the device nodes open (package bpf's
// device watch, or its iter/task_file program, wired in by the hold), and
// only those processes' /proc entries are read. Where no Finder is set or
// it cannot answer (no BPF, not permitted), or a pattern names a plain
// file, the walk of every process in /proc (scan.go) is the answer, as
// before.
package device

import (
	"sync"
)

// DevNum is a device node as the kernel's fd tables know it: its kind and the
// device number it stands for.
type DevNum struct {
	Block        bool
	Major, Minor uint32
}

// Finder returns the tgids of every process with one of devs open (a
// superset is fine: each is checked through /proc like the walk checks it);
// paths are the nodes being checked, of which devs are the numbers. An
// error means it cannot answer, and the walk is done instead.
type Finder func(devs []DevNum, paths []string) ([]int, error)

// Method says how a scan found its holders.
type Method string

const (
	MethodKernel Method = "kernel" // the Finder named the candidates
	MethodProc   Method = "proc"   // every process in /proc was read
)

var finder struct {
	sync.Mutex
	f Finder
}

// UseFinder makes ScanHolders ask f first, process-wide (nil: walk /proc).
func UseFinder(f Finder) {
	finder.Lock()
	defer finder.Unlock()
	finder.f = f
}

func currentFinder() Finder {
	finder.Lock()
	defer finder.Unlock()
	return finder.f
}

// ScanHoldersWith is ScanHolders through f (nil: the walk of /proc), and
// says which way it went and, for the walk, why f did not answer.
func ScanHoldersWith(patterns []string, f Finder) ([]Holder, Method, string, error) {
	nodes, err := Expand(patterns)
	if err != nil || len(nodes) == 0 {
		return nil, MethodProc, "", err
	}
	why := "no kernel finder"
	if f != nil {
		devs, ok := devsOf(nodes)
		if !ok {
			why = "a pattern names a file, not a device node"
		} else if pids, ferr := f(devs, pathsOf(nodes)); ferr != nil {
			why = ferr.Error()
		} else {
			return scanPIDs(nodes, pids), MethodKernel, "", nil
		}
	}
	hs, err := scan(nodes)
	return hs, MethodProc, why, err
}

// devsOf returns the device numbers of nodes; ok is false when one of them
// is not a device node (the kernel path matches device numbers only).
func devsOf(nodes []Node) ([]DevNum, bool) {
	devs := make([]DevNum, 0, len(nodes))
	for _, n := range nodes {
		switch n.key.kind {
		case 'c':
			devs = append(devs, DevNum{Major: n.key.major, Minor: n.key.minor})
		case 'b':
			devs = append(devs, DevNum{Block: true, Major: n.key.major, Minor: n.key.minor})
		default:
			return nil, false
		}
	}
	return devs, true
}

// pathsOf is the nodes' paths.
func pathsOf(nodes []Node) []string {
	paths := make([]string, len(nodes))
	for i, n := range nodes {
		paths[i] = n.Path
	}
	return paths
}
