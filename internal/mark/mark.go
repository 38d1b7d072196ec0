// Package mark holds what the tests (and only they) use to find their own
// processes: every process a test starts carries a unique marker in its
// environment, inherited by everything it creates, and a test only ever
// looks at, or signals, a process that still carries its marker.
package mark

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"os"
	"syscall"
	"time"

	"github.com/gpu-hold/gpu-hold/proc"
)

// Env is the environment variable that carries a marker.
const Env = "GPU_HOLD_TEST_MARK"

// New returns a fresh marker.
func New() string {
	var b [8]byte
	rand.Read(b[:])
	return "gpuholdtest-" + hex.EncodeToString(b[:])
}

// Carries reports whether pid's environment carries mark.
func Carries(pid int, mark string) bool {
	env, err := proc.ReadFile(pid, "environ")
	if err != nil {
		return false
	}
	return bytes.Contains(append(append([]byte{0}, env...), 0), []byte("\x00"+Env+"="+mark+"\x00"))
}

// Live returns the live (not zombie) processes that carry mark, but the
// calling process.
func Live(mark string) map[int]proc.Stat {
	out := make(map[int]proc.Stat)
	self := os.Getpid()
	proc.Walk(func(st proc.Stat) {
		if st.PID != self && !st.Dead() && Carries(st.PID, mark) {
			out[st.PID] = st
		}
	})
	return out
}

// Kill SIGKILLs every process that carries mark, through a pidfd opened
// after its start time was checked, until none is left (bounded).
func Kill(mark string) {
	for i := 0; i < 50; i++ {
		live := Live(mark)
		if len(live) == 0 {
			return
		}
		for _, st := range live {
			proc.Signal(st.Ident, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
