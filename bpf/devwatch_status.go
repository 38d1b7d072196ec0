// devwatch_status.go owns what an operator is shown of the host's pinned
// device watch: its maps' sizes and its programs' counters, read without
// the watch's lock (nothing is written).
package bpf

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"
)

// WatchStatus is the host's pinned watch as its maps stand.
type WatchStatus struct {
	Pinned   bool
	Dir      string
	Devices  int // device numbers checked at least once
	Openers  int // processes the watch holds as possible holders
	Dentries int // device nodes' dentries it counts references of
	// Installs: its fd_install and replace_fd hooks are attached, so it
	// credits the openers' sleeping calls (where the kernel allows fentry).
	Installs bool
	// The programs' counters since the watch was attached, and at the
	// last seed (a full read of every fd table).
	Now, AtSeed WatchCounters
}

// WatchCounters are the watch programs' counts: opens of a checked
// device, forks of its openers, and openers or dentries lost to a full
// map (a loss makes the next check a seed).
type WatchCounters = devwatchWatchState

// ReadWatchStatus reads the host's pinned watch (Pinned false: none).
func ReadWatchStatus() (WatchStatus, error) {
	st := WatchStatus{Dir: devwatchPinDir(), Pinned: WatchPinned()}
	if !st.Pinned {
		return st, nil
	}
	_, err := os.Stat(filepath.Join(st.Dir, watchLinkReplace))
	st.Installs = err == nil
	ro := &ebpf.LoadPinOptions{ReadOnly: true}
	var errs []error
	for name, n := range map[string]*int{"watched": &st.Devices, "openers": &st.Openers, "dentries": &st.Dentries} {
		m, err := ebpf.LoadPinnedMap(filepath.Join(st.Dir, name), ro)
		if err == nil {
			*n, err = countKeys(m)
			m.Close()
		}
		errs = append(errs, err)
	}
	state, err := ebpf.LoadPinnedMap(filepath.Join(st.Dir, "state"), ro)
	if err == nil {
		err = errors.Join(state.Lookup(uint32(0), &st.Now), state.Lookup(uint32(1), &st.AtSeed))
		state.Close()
	}
	if err := errors.Join(append(errs, err)...); err != nil {
		return st, fmt.Errorf("reading the device watch pinned at %s: %w", st.Dir, err)
	}
	return st, nil
}

// countKeys counts a map's entries by walking its keys.
func countKeys(m *ebpf.Map) (int, error) {
	n := 0
	it := m.Iterate()
	var k, v []byte
	for it.Next(&k, &v) {
		n++
	}
	return n, it.Err()
}
