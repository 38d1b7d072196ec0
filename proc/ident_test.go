// ident_test.go checks the parts of process identity that a teardown trusts
// with its signals: the stat parser and the start-time checks.
package proc

import (
	"os"
	"testing"
)

// A command name may hold spaces and parentheses: fields are counted from
// the last ')'. A parser that splits the whole line on spaces reads the
// wrong fields here.
func TestParseStatOddComm(t *testing.T) {
	line := "4242 (a) b (c d) S 17 4242 99 0 -1 4194304 100 0 0 0 1 2 0 0 20 0 1 0 123456 1000 200 18446744073709551615\n"
	st, err := parseStat(4242, line)
	if err != nil {
		t.Fatal(err)
	}
	if st.Comm != "a) b (c d" || st.State != 'S' || st.PPID != 17 || st.PGID != 4242 || st.SID != 99 || st.Start != 123456 {
		t.Fatalf("parsed %+v", st)
	}
}

func TestParseStatDamaged(t *testing.T) {
	for _, line := range []string{"", "12 (x", "12 (x) S 1 2 3", "12 (x) S 1 2 3 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 notanumber 0"} {
		if _, err := parseStat(12, line); err == nil {
			t.Errorf("parseStat(%q) gave no error", line)
		}
	}
}

func TestSelfAndZombie(t *testing.T) {
	self, err := Self()
	if err != nil || self.PID != os.Getpid() || self.Start == 0 {
		t.Fatalf("Self() = %+v, %v", self, err)
	}
	if !Alive(self) {
		t.Fatal("Alive(self) is false")
	}
	if Alive(Ident{PID: self.PID, Start: self.Start + 1}) {
		t.Fatal("Alive with another start time is true: a recycled pid would pass")
	}
	if _, err := Open(Ident{PID: self.PID, Start: self.Start + 1}); err != ErrGone {
		t.Fatalf("Open with another start time = %v, want ErrGone", err)
	}
}
