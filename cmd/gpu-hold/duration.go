// duration.go owns the duration flag type: Go durations (90s, 45m, 2h) or a
// bare number of seconds, as fleet scripts write them.
package main

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/spf13/pflag"
)

type durationValue time.Duration

func (d *durationValue) Set(s string) error {
	bad := fmt.Errorf("%q is not a duration: use e.g. 90s, 45m, 2h or a number of seconds", s)
	if n, err := strconv.ParseFloat(s, 64); err == nil {
		// NaN, Inf and numbers past 292 years are no time.Duration, and
		// Go converts them differently by CPU (to 0, the largest or the
		// smallest duration): "inf" must not mean no limit on one host.
		if math.IsNaN(n) || math.Abs(n) >= math.MaxInt64/float64(time.Second) {
			return bad
		}
		*d = durationValue(time.Duration(n * float64(time.Second)))
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return bad
	}
	*d = durationValue(v)
	return nil
}

func (d *durationValue) String() string { return time.Duration(*d).String() }
func (d *durationValue) Type() string   { return "duration" }

func durationVarP(f *pflag.FlagSet, p *time.Duration, name, short string, def time.Duration, usage string) {
	*p = def
	f.VarP((*durationValue)(p), name, short, usage)
}
