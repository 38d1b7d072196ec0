// options.go owns the settings of one hold, as parsed from the command
// line, and their validation.
package hold

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/rs/zerolog"

	"github.com/gpu-hold/gpu-hold/internal/device"
	"github.com/gpu-hold/gpu-hold/internal/lobby"
)

// Options configure one hold.
type Options struct {
	Label        string
	Resource     string
	Dir          string        // queue directory (resolved)
	MaxHold      time.Duration // 0: none
	Wait         time.Duration // 0: for ever
	Grace        time.Duration
	SurvivorWait time.Duration
	Track        string // auto, bpf, proc
	Cgroup       string // auto, on, off
	Cmd          []string

	Dump        string        // record path ("" = records dir of the resource)
	KeepRecords int           // this user's records kept per resource (0 = no count limit)
	RecordAge   time.Duration // this user's records older than this are pruned (0 = no age bound)

	Devices       []string      // --device: replaces the resource's device list
	Count         int           // --count: devices of the resource's pool (0: 1)
	DeviceHolders device.Policy // warn, wait, fail
	DeviceWait    time.Duration // bound for --device-holders=wait
	MemFloor      uint64        // bytes; 0 = none
	MetricsDir    string
	Etcd          *Fleet        // the fleet queue (nil: the directory)
	LostGrace     time.Duration // teardown grace after a lost lease
	// LostGraceGiven: --lost-grace was given (one that does not fit the
	// lease is refused; the default is shortened: lease.go).
	LostGraceGiven bool

	Yield   bool // give the token up to any ticket that does not yield (yield.go)
	Restart bool // with Yield: queue again after each end (yield_keeper.go)

	Log    zerolog.Logger
	Stdout io.Writer // payload stdout (nil: os.Stdout)
	Stderr io.Writer // payload stderr (nil: os.Stderr)
	Status io.Writer // live one-line queue status (nil: none; set on a terminal)
	// Resume is the waiting ticket the lobby image hands back (nil: this
	// image queues its own).
	Resume *lobby.State
}

// Validate checks what flag parsing cannot; errors are usage errors.
func (o *Options) Validate() error {
	if len(o.Cmd) == 0 {
		return errors.New("no command to run: put it after --, e.g. gpu-hold -t 1h -- ./job.sh")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"--max-hold", o.MaxHold}, {"--wait", o.Wait}, {"--grace", o.Grace}, {"--survivor-wait", o.SurvivorWait}, {"--device-wait", o.DeviceWait}, {"--lost-grace", o.LostGrace}, {"--record-age", o.RecordAge}} {
		if d.v < 0 {
			return fmt.Errorf("%s must not be negative (got %v): use 0 for none", d.name, d.v)
		}
	}
	switch o.Track {
	case "auto", "bpf", "proc":
	default:
		return fmt.Errorf("--track %q is not one of auto, bpf, proc", o.Track)
	}
	switch o.Cgroup {
	case "auto", "on", "off":
	default:
		return fmt.Errorf("--cgroup %q is not one of auto, on, off", o.Cgroup)
	}
	if o.KeepRecords < 0 {
		return fmt.Errorf("--keep-records must not be negative (got %d): use 0 for no count limit", o.KeepRecords)
	}
	if o.Count < 0 {
		return fmt.Errorf("--count must be at least 1 (got %d)", o.Count)
	}
	if o.Restart && !o.Yield {
		return errors.New("--restart is for serve keepers: use it with --yield (a loop in the shell restarts any other command)")
	}
	if _, err := device.ParsePolicy(string(o.DeviceHolders)); err != nil {
		return err
	}
	return o.fitLostGrace()
}
