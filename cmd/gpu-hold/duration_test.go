// duration_test.go owns the tests of the duration flag type: Go durations
// and bare seconds are read, anything else is refused naming the value.
// Negative values parse; the commands that take them refuse them (see
// root_test.go), each naming its flag.
package main

import (
	"strings"
	"testing"
	"time"
)

func TestDurationValue(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
	}{
		{"90s", 90 * time.Second},
		{"45m", 45 * time.Minute},
		{"2h30m", 150 * time.Minute},
		{"90", 90 * time.Second}, // bare seconds, as fleet scripts write them
		{"1.5", 1500 * time.Millisecond},
		{"0", 0},
		{"-5", -5 * time.Second},
		{"-1s", -time.Second},
	} {
		var d durationValue
		if err := d.Set(c.in); err != nil || time.Duration(d) != c.want {
			t.Errorf("Set(%q) = %v, %v; want %v", c.in, time.Duration(d), err, c.want)
		}
	}
	// nan, inf and 1e30 parse as floats but are no duration.
	for _, in := range []string{"", "soon", "10q", "1h-", "s", "1,5", "nan", "inf", "-Inf", "1e30", "-1e30"} {
		var d durationValue
		err := d.Set(in)
		if err == nil || !strings.Contains(err.Error(), `"`+in+`" is not a duration`) || !strings.Contains(err.Error(), "90s") {
			t.Errorf("Set(%q): %v, want an error naming it and giving examples", in, err)
		}
	}
}
