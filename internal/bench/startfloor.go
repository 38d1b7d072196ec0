// startfloor.go owns the floors beside "all 50 queued": the same number
// of processes started the same way that only start and exit, so that the
// queueing time reads against what starting that many Go processes costs
// this machine in this run.
package main

import (
	"fmt"
	"path/filepath"
	"time"
)

// startFloors are the floors' commands: the full image doing nothing but
// start (its runtime, package init and flag parsing), and the smallest Go
// program the build installs (the lobby, which exits at once when gpu-hold
// did not start it).
func (b *bench) startFloors() map[string][]string {
	return map[string][]string{
		floorImage: {b.bin, "--version"},
		floorGo:    {filepath.Join(filepath.Dir(b.bin), "gpu-hold-lobby")},
	}
}

const (
	floorImage = "image"
	floorGo    = "go"
)

// startAll starts n copies of argv at once and returns the time from the
// first start to the last exit.
func (b *bench) startAll(argv []string, n int) (time.Duration, error) {
	var kids []*child
	t0 := time.Now()
	for i := 0; i < n; i++ {
		c, err := b.startProc(argv, nil, nil)
		if err != nil {
			return 0, err
		}
		kids = append(kids, c)
	}
	var last time.Time
	for _, c := range kids {
		if err := c.wait(time.Minute); err != nil {
			return 0, err
		}
		if c.exitAt.After(last) {
			last = c.exitAt
		}
	}
	return last.Sub(t0), nil
}

// measureFloors fills s's floors, each over holdsQueued processes.
func (b *bench) measureFloors(s *queuedSample) error {
	s.floors = map[string]float64{}
	for name, argv := range b.startFloors() {
		d, err := b.startAll(argv, holdsQueued)
		if err != nil {
			return fmt.Errorf("the %s start floor: %w", name, err)
		}
		s.floors[name] = ms(d)
	}
	return nil
}
