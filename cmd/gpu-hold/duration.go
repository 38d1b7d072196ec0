// duration.go owns the duration flag type: Go durations (90s, 45m, 2h) or a
// bare number of seconds, as fleet scripts write them.
package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/pflag"
)

type durationValue time.Duration

func (d *durationValue) Set(s string) error {
	if n, err := strconv.ParseFloat(s, 64); err == nil {
		*d = durationValue(time.Duration(n * float64(time.Second)))
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is not a duration: use e.g. 90s, 45m, 2h or a number of seconds", s)
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
