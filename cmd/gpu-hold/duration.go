// duration.go owns the duration flag type: Go durations (90s, 45m, 2h), a
// bare number of seconds as fleet scripts write them, days (1d, 2d12h) and
// srun's [D-]HH:MM:SS; and how a duration is shown in messages.
package main

import (
	"errors"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// maxSeconds is the longest time.Duration, in seconds (about 292 years).
const maxSeconds = float64(math.MaxInt64) / float64(time.Second)

var (
	errNegative = errors.New("must not be negative: use 0 for none")
	errTooLong  = errors.New("is longer than a time.Duration can hold (about 292 years): use 0 for no limit")
)

type durationValue time.Duration

func (d *durationValue) Set(s string) error {
	v, err := parseDuration(strings.TrimSpace(s))
	if err != nil {
		return err
	}
	*d = durationValue(v)
	return nil
}

// parseDuration reads one of the forms; a negative value (however small:
// -1e-12 rounds to 0, which would mean "no limit") and one past 292 years
// (inf, 1e10) are refused rather than turned into something else.
func parseDuration(s string) (time.Duration, error) {
	if strings.HasPrefix(s, "-") && s != "-0" {
		if _, err := parseDuration(s[1:]); err == nil {
			return 0, errNegative
		}
	}
	if n, err := strconv.ParseFloat(s, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		return seconds(n)
	}
	if strings.ContainsAny(s, ":-") {
		return parseClock(s)
	}
	if i := strings.IndexByte(s, 'd'); i > 0 {
		return parseDays(s[:i], s[i+1:])
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		// time.ParseDuration says "invalid" for an overflow too.
		if goDuration.MatchString(s) {
			return 0, errTooLong
		}
		return 0, errNotDuration
	}
	return v, nil
}

// goDuration is the syntax of a Go duration.
var goDuration = regexp.MustCompile(`^([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|ms|s|m|h)(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|ms|s|m|h))*$`)

var errNotDuration = errors.New("not a duration: use e.g. 90s, 45m, 2h, 1d, 1:30:00 (srun's [D-]HH:MM:SS) or a number of seconds")

// seconds turns a bare number of seconds into a duration.
func seconds(n float64) (time.Duration, error) {
	switch {
	case math.IsNaN(n):
		return 0, errNotDuration
	case n < 0:
		return 0, errNegative
	case n >= maxSeconds: // +Inf too
		return 0, errTooLong
	}
	return time.Duration(n * float64(time.Second)), nil
}

// parseDays reads Nd optionally followed by a Go duration (2d12h).
func parseDays(days, rest string) (time.Duration, error) {
	n, err := strconv.ParseFloat(days, 64)
	if err != nil || math.IsNaN(n) || n < 0 || strings.ContainsAny(days, "eEnN+") {
		return 0, errNotDuration
	}
	d, err := seconds(n * 86400)
	if err != nil {
		return 0, err
	}
	if rest == "" {
		return d, nil
	}
	r, err := parseDuration(rest)
	if err != nil || strings.HasPrefix(rest, "-") {
		return 0, errNotDuration
	}
	if r > time.Duration(math.MaxInt64)-d {
		return 0, errTooLong
	}
	return d + r, nil
}

// parseClock reads srun's forms: MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS.
func parseClock(s string) (time.Duration, error) {
	var days int64
	i := strings.IndexByte(s, '-')
	hasDays := i >= 0
	if hasDays {
		n, err := clockField(s[:i], -1)
		if err != nil {
			return 0, err
		}
		days, s = n, s[i+1:]
	}
	parts := strings.Split(s, ":")
	if len(parts) > 3 || (!hasDays && len(parts) < 2) {
		return 0, errNotDuration
	}
	// Without days, two fields are MM:SS; with days, they start at hours.
	unit := []int64{3600, 60, 1}
	if len(parts) == 2 && !hasDays {
		unit = unit[1:]
	}
	total := days * 86400
	for i, p := range parts {
		limit := int64(59)
		if i == 0 {
			limit = -1 // the first field may be large (90:00 is 90 minutes)
		}
		n, err := clockField(p, limit)
		if err != nil {
			return 0, err
		}
		total += n * unit[i]
	}
	return seconds(float64(total))
}

// clockField reads one field of a clock form: digits only, at most limit
// (none when limit < 0).
func clockField(p string, limit int64) (int64, error) {
	if p == "" || strings.Trim(p, "0123456789") != "" || len(p) > 12 {
		return 0, errNotDuration
	}
	n, _ := strconv.ParseInt(p, 10, 64)
	if limit >= 0 && n > limit {
		return 0, errNotDuration
	}
	return n, nil
}

func (d *durationValue) String() string { return time.Duration(*d).String() }
func (d *durationValue) Type() string   { return "duration" }

func durationVarP(f *pflag.FlagSet, p *time.Duration, name, short string, def time.Duration, usage string) {
	*p = def
	f.VarP((*durationValue)(p), name, short, usage)
}
