// duration_test.go owns the tests of the duration flag type: Go durations,
// bare seconds, days and srun's clock forms are read; negatives (however
// small), NaN and anything past 292 years are refused with a reason.
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
		{"-0", 0},
		{"1d", 24 * time.Hour},
		{"1.5d", 36 * time.Hour},
		{"2d12h", 60 * time.Hour},
		{"1:30:00", 90 * time.Minute}, // srun: HH:MM:SS
		{"05:30", 5*time.Minute + 30*time.Second},
		{"90:00", 90 * time.Minute},
		{"2-12", 60 * time.Hour}, // D-HH
		{"1-00:30", 24*time.Hour + 30*time.Minute},
		{"1-02:03:04", 26*time.Hour + 3*time.Minute + 4*time.Second},
	} {
		var d durationValue
		if err := d.Set(c.in); err != nil || time.Duration(d) != c.want {
			t.Errorf("Set(%q) = %v, %v; want %v", c.in, time.Duration(d), err, c.want)
		}
	}
	for _, c := range []struct{ in, why string }{
		{"", "not a duration"}, {"soon", "not a duration"}, {"10q", "not a duration"}, {"1h-", "not a duration"},
		{"s", "not a duration"}, {"1,5", "not a duration"}, {"nan", "not a duration"}, {"NaN", "not a duration"},
		{"1:60", "not a duration"}, {"1:2:3:4", "not a duration"}, {"a:b", "not a duration"}, {"1d-5h", "not a duration"},
		{"inf", "longer than"}, {"+Inf", "longer than"}, {"1e10", "longer than"}, {"9999999999", "longer than"},
		{"1e400", "longer than"}, {"99999999999h", "longer than"}, {"200000d", "longer than"},
		{"-5", "negative"}, {"-1s", "negative"}, {"-1e-12", "negative"}, {"-Inf", "negative"}, {"-1d", "negative"}, {"-1:00", "negative"},
	} {
		var d durationValue
		err := d.Set(c.in)
		if err == nil || !strings.Contains(err.Error(), c.why) {
			t.Errorf("Set(%q) = %v, %v; want an error saying %q", c.in, time.Duration(d), err, c.why)
		}
	}
}
