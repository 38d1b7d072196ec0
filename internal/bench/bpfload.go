// bpfload.go owns section 5's load and attach timings on their own: in the
// bench process, the lineage programs loaded and attached from nothing
// (the first load reads the kernel's BTF; later ones in the same process
// do not), and a spare taken and attached, as holds do when one is there.
package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/gpu-hold/gpu-hold/bpf"
)

// BPFLoadTimes is what making one hold's eBPF tracker costs, by way.
type BPFLoadTimes struct {
	FirstLoadMS Num    `json:"first_load_ms"` // Load in a process that has not read the kernel's BTF
	LoadMS      Dist   `json:"load_ms"`       // Load once the BTF is read
	TakeMS      Dist   `json:"spare_take_ms"` // TakeSpare: claim, open the pins, check, attach
	Err         string `json:"error,omitempty"`
}

// bpfLoadTimes times reps loads and reps spare takes, alternating.
func bpfLoadTimes(reps int) *BPFLoadTimes {
	out := &BPFLoadTimes{FirstLoadMS: Num(nan)}
	var loads, takes []float64
	for i := 0; i < reps; i++ {
		t0 := time.Now()
		l, err := bpf.Load(bpf.Options{HoldID: fmt.Sprintf("bench-load-%d", i)})
		if err != nil {
			out.Err = err.Error()
			return out
		}
		d := ms(time.Since(t0))
		l.Close()
		if i == 0 {
			out.FirstLoadMS = Num(d)
		} else {
			loads = append(loads, d)
		}
		d, err = takeTimed(fmt.Sprintf("bench-take-%d", i))
		if err != nil {
			out.Err = err.Error()
			return out
		}
		takes = append(takes, d)
	}
	out.LoadMS, out.TakeMS = summarize(loads), summarize(takes)
	return out
}

// takeTimed makes a spare and times taking one. A hold's maker may hold
// the makers' lock, or a hold take the spare first: it tries again.
func takeTimed(holdID string) (float64, error) {
	for try := 0; ; try++ {
		if _, err := bpf.MakeSpares(bpf.SpareCount() + 1); err != nil {
			return 0, err
		}
		t0 := time.Now()
		l, err := bpf.TakeSpare(holdID)
		d := ms(time.Since(t0))
		if err == nil {
			l.Close()
			return d, nil
		}
		if !errors.Is(err, bpf.ErrNoSpare) || try == 50 {
			return 0, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}
