// cut_test.go owns the test of a cut grace: closing CutGrace during the
// grace goes on to KILL at once, as a second Ctrl-C asks.
package teardown

import (
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/gpu-hold/gpu-hold/internal/record"
)

func TestCutGrace(t *testing.T) {
	t.Parallel()
	l := newLineage(t)
	id := l.start(`trap "" TERM; exec sleep 600`)
	l.sleeping(id)
	if !sigMask(id.PID, "SigIgn", syscall.SIGTERM) {
		t.Fatalf("%v does not ignore TERM", id)
	}
	td := l.teardown(time.Hour, 5*time.Second)
	cut := make(chan struct{})
	td.CutGrace = cut
	// Cut once the grace is under way: after TERM, while the wait blocks.
	var once sync.Once
	td.Log = td.Log.Hook(zerolog.HookFunc(func(_ *zerolog.Event, _ zerolog.Level, msg string) {
		if msg == "TERM sent" {
			once.Do(func() { time.AfterFunc(100*time.Millisecond, func() { close(cut) }) })
		}
	}))
	done := make(chan Outcome, 1)
	go func() { done <- td.Run() }()
	select {
	case out := <-done:
		if out.Termed != 1 || out.Killed != 1 || len(out.Survivors) != 0 {
			t.Errorf("outcome %+v, want 1 termed, 1 killed, no survivors", out)
		}
	case <-time.After(time.Minute): // the grace is an hour: only a cut ends it
		t.Fatal("the teardown went on waiting out its grace after CutGrace closed")
	}
	l.wantFate(id, record.FateKill)
	l.wantNoneLeft()
}
