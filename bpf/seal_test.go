// seal_test.go tests the two seals: that the fork seal's object references
// no kfunc (so that kernels before 6.13 load it) and the birth seal's does,
// and, as root, what each does to a member that forks after the seal and
// to its child.
package bpf

import (
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
)

// kfuncCalls counts the kfunc calls in a compiled copy of the programs.
func kfuncCalls(t *testing.T, spec *ebpf.CollectionSpec) int {
	t.Helper()
	n := 0
	for _, p := range spec.Programs {
		for _, ins := range p.Instructions {
			if ins.IsKfuncCall() {
				n++
			}
		}
	}
	return n
}

func TestSealObjects(t *testing.T) {
	birth, err := specFor(SealBirth)
	if err != nil {
		t.Fatal(err)
	}
	fork, err := specFor(SealFork)
	if err != nil {
		t.Fatal(err)
	}
	if n := kfuncCalls(t, birth); n != 1 {
		t.Errorf("the birth seal's programs call %d kfuncs, want 1 (bpf_send_signal_task)", n)
	}
	if n := kfuncCalls(t, fork); n != 0 {
		t.Errorf("the fork seal's programs call %d kfuncs, want none: a kernel before 6.13 would refuse them", n)
	}
}

func TestSealEnv(t *testing.T) {
	t.Setenv(SealEnv, "fork")
	if c, err := HostSeal(); err != nil || c.Mode != SealFork || c.Why != SealEnv+"=fork" {
		t.Errorf("%s=fork: %+v, %v", SealEnv, c, err)
	}
	t.Setenv(SealEnv, "sometimes")
	if _, err := HostSeal(); err == nil {
		t.Errorf("%s=sometimes was accepted", SealEnv)
	}
	t.Setenv(SealEnv, "birth")
	c, err := HostSeal()
	if has, _ := HasSendSignalTask(); has != (err == nil) || has && c.Mode != SealBirth {
		t.Errorf("%s=birth with the kfunc %v: %+v, %v", SealEnv, has, c, err)
	}
}

// TestSealKills: under each seal this kernel loads, a payload that forks
// a short sleep in a loop is sealed. It dies of SIGKILL at its next fork.
// Under the birth seal that fork's child dies of SIGKILL at birth; under
// the fork seal it is a member (flagged born sealed) that runs: its sleep
// exits 0, since nothing but the KILL pass (not run here) would end it.
func TestSealKills(t *testing.T) {
	for _, seal := range []SealMode{SealBirth, SealFork} {
		t.Run(string(seal), func(t *testing.T) {
			if has, err := HasSendSignalTask(); seal == SealBirth && !has {
				t.Skipf("this kernel has no %s (Linux < 6.13; %v): only the fork seal loads here", SendSignalTask, err)
			}
			sealKills(t, seal)
		})
	}
}

func sealKills(t *testing.T, seal SealMode) {
	l, rd, cmd := launchMarked(t, Options{HoldID: "test-seal-" + string(seal), Seal: seal}, "while :; do sleep 0.05; done")
	if l.SealMode() != seal {
		t.Fatalf("loaded seal %q, want %q", l.SealMode(), seal)
	}
	time.Sleep(200 * time.Millisecond) // a few forks before the seal
	if err := l.Seal(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if ws := cmd.ProcessState.Sys().(syscall.WaitStatus); ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the sealed payload ended with %v, want SIGKILL at its fork", cmd.ProcessState)
	}
	payload := cmd.Process.Pid

	// The payload's last fork: its child, and that child's exit.
	var born *Event
	exits := map[int]Event{}
	deadline := time.Now().Add(5 * time.Second)
	for born == nil || exits[born.PID].Kind == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no sealed fork by the payload %d and its child's exit in 5 s (child %+v)", payload, born)
		}
		time.Sleep(20 * time.Millisecond)
		if _, err := rd.Drain(func(ev Event) {
			switch {
			case ev.Kind == KindExit:
				exits[ev.PID] = ev
			case ev.PPID == payload && (ev.Kind == KindKilledAtBirth || ev.Flags&MemberBornSealed != 0):
				born = &ev
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	code, sig := exits[born.PID].ExitStatus()
	c, err := l.Counters()
	if err != nil {
		t.Fatal(err)
	}
	switch seal {
	case SealBirth:
		if born.Kind != KindKilledAtBirth || born.Flags&EventChildKillFailed != 0 || sig != int(syscall.SIGKILL) || c.KilledAtBirth == 0 {
			t.Errorf("birth seal: child %+v ended with code %d signal %d, counters %+v: want killed at birth", born, code, sig, c)
		}
	case SealFork:
		if born.Kind != KindFork || sig != 0 || code != 0 || c.KilledAtBirth != 0 {
			t.Errorf("fork seal: child %+v ended with code %d signal %d, counters %+v: want a member that ran its sleep to the end", born, code, sig, c)
		}
	}
	if born.Flags&EventParentKillFailed != 0 {
		t.Errorf("the sealed fork's event says the parent's SIGKILL failed: %+v", born)
	}
}
