package cgroup

import (
	"testing"
	"time"
)

// TestFresh: a cgroup made ahead is used only while no sweep can have
// taken it, and one named by Open (a dead holder's) never counts as made.
func TestFresh(t *testing.T) {
	if (&Cgroup{}).Fresh() {
		t.Error("a cgroup that was not made here is fresh")
	}
	if !(&Cgroup{made: time.Now()}).Fresh() {
		t.Error("a cgroup made just now is not fresh")
	}
	if (&Cgroup{made: time.Now().Add(-staleCgroupAge / 2)}).Fresh() {
		t.Errorf("a cgroup made %v ago is fresh; a sweep takes one at %v", staleCgroupAge/2, staleCgroupAge)
	}
}
