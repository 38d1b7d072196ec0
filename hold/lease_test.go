// lease_test.go tests how long --lost-grace may be on the etcd queue
// (lease.go): for every TTL the queue accepts, what is left of the grace
// ends before the lease can expire at etcd; one given that does not fit is
// refused, saying what fits; the default is shortened.
package hold

import (
	"strings"
	"testing"
	"time"
)

// fleetOf is a fleet of ttl, renewed as etcdq renews (TTL/3).
func fleetOf(ttl time.Duration) *Fleet { return &Fleet{TTL: ttl, Interval: ttl / 3} }

func TestLostGraceFitsEveryTTL(t *testing.T) {
	for ttl := 2 * time.Second; ttl <= 60*time.Second; ttl += time.Second {
		for _, given := range []bool{false, true} {
			o := Options{Etcd: fleetOf(ttl), LostGrace: 2 * time.Second, LostGraceGiven: given}
			err := o.fitLostGrace()
			if err != nil {
				if !given {
					t.Fatalf("ttl %v: the default grace was refused: %v", ttl, err)
				}
				continue
			}
			// From the deadline, the payload's end has one interval.
			if o.LostGrace+lostMargin > o.Etcd.Interval {
				t.Errorf("ttl %v, given %v: grace %v leaves less than %v of the %v interval", ttl, given, o.LostGrace, lostMargin, o.Etcd.Interval)
			}
		}
	}
}

func TestLostGraceTooLongGiven(t *testing.T) {
	o := Options{Etcd: fleetOf(3 * time.Second), LostGrace: 2 * time.Second, LostGraceGiven: true}
	err := o.fitLostGrace()
	if err == nil || !strings.Contains(err.Error(), "--lost-grace 500ms or less") || !strings.Contains(err.Error(), "?ttl=8") {
		t.Fatalf("--lost-grace 2s with ttl 3s: %v, want a refusal that names 500ms and ttl=8", err)
	}
	o = Options{Etcd: fleetOf(3 * time.Second), LostGrace: 2 * time.Second}
	if err := o.fitLostGrace(); err != nil || o.LostGrace != 500*time.Millisecond {
		t.Fatalf("the default with ttl 3s: %v, grace %v, want it shortened to 500ms", err, o.LostGrace)
	}
	o = Options{Etcd: fleetOf(10 * time.Second), LostGrace: 2 * time.Second, LostGraceGiven: true}
	if err := o.fitLostGrace(); err != nil || o.LostGrace != 2*time.Second {
		t.Fatalf("2s with ttl 10s: %v, grace %v, want it kept", err, o.LostGrace)
	}
}
