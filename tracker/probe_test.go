// probe_test.go owns the tests of the eBPF backend's kernel floor as the
// probes apply it (checkFloor): below 5.11, only an unlimited
// RLIMIT_MEMLOCK lets the programs load, and the reason names the floor.
package tracker

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestCheckFloor(t *testing.T) {
	const limited = 8 << 20 // the usual default
	for _, c := range []struct {
		rel     string
		memlock uint64
		refused bool
	}{
		{"5.10.0-46-amd64", limited, true},
		{"5.10.0-46-amd64", unix.RLIM_INFINITY, false},
		{"5.4.0-1-generic", 64 << 10, true},
		{"5.11.0", limited, false},
		{"6.1.0-37-amd64", limited, false},
		{"6.12.117+deb13-amd64", 64 << 10, false},
		{"6.18.44-fc-v1300", limited, false},
	} {
		err := checkFloor(c.rel, c.memlock)
		if (err != nil) != c.refused {
			t.Errorf("checkFloor(%q, %d) = %v, want refused %v", c.rel, c.memlock, err, c.refused)
			continue
		}
		if err != nil && !strings.Contains(err.Error(), c.rel+" is older than 5.11, which the eBPF tracker needs") {
			t.Errorf("checkFloor(%q, %d) does not name the release and the floor: %v", c.rel, c.memlock, err)
		}
	}
}
