// Package mark holds what the tests (and only they) use to find their own
// processes: every process a test starts carries a unique marker in its
// environment, inherited by everything it creates, and a test only ever
// looks at, or signals, a process that still carries its marker.
package mark

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/proc"
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
// Tests call it in walks of the host, so its buffers are reused.
func Carries(pid int, mark string) bool {
	buf := envBufs.Get().(*[]byte)
	defer envBufs.Put(buf)
	return carries(readEnv(pid, *buf), mark)
}

var envBufs = sync.Pool{New: func() any { b := make([]byte, envBuf); return &b }}

// carries reports whether the environment block env holds mark.
func carries(env []byte, mark string) bool { return proc.EnvHas(env, Env, mark) }

// Live returns the live (not zombie) processes that carry mark, but the
// calling process. A process the walk caught in an exec is read again,
// alone, until it can be told (see look), within liveBound.
func Live(mark string) map[int]proc.Stat {
	live, empty := look(mark)
	buf := envBufs.Get().(*[]byte)
	defer envBufs.Put(buf)
	for deadline := time.Now().Add(liveBound); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		empty = tell(empty, mark, *buf, live)
		if !inExec(empty) {
			break
		}
	}
	return live
}

// liveBound bounds Live's second looks; two emptyFor, as one read empty
// for emptyFor is taken for a process with no environment.
const liveBound = 2 * emptyFor

// tell reads again each of the processes whose environment read empty,
// adds to live those that now show mark, and returns those still empty.
func tell(empty []proc.Ident, mark string, buf []byte, live map[int]proc.Stat) []proc.Ident {
	var still []proc.Ident
	for _, id := range empty {
		st, ok := proc.LiveStat(id)
		if !ok {
			continue
		}
		switch env := readEnv(id.PID, buf); {
		case len(env) == 0:
			still = append(still, id)
		case carries(env, mark):
			live[id.PID] = st
		}
	}
	return still
}

// pfKthread is the kernel's task flag of a kernel thread.
const pfKthread = 0x00200000

// look returns what Live does, and the live processes whose environment
// read empty. A process in an execve shows none from the switch to its new
// memory until the exec has written all of it, and a read opened on the
// old memory reads nothing once that is gone: such a process cannot be
// told yet.
func look(mark string) (map[int]proc.Stat, []proc.Ident) {
	out := make(map[int]proc.Stat)
	var empty []proc.Ident
	self := os.Getpid()
	buf := envBufs.Get().(*[]byte)
	defer envBufs.Put(buf)
	proc.Walk(func(st proc.Stat) {
		if st.PID == self || st.Dead() || st.Flags&pfKthread != 0 {
			return
		}
		switch env := readEnv(st.PID, *buf); {
		case len(env) == 0:
			empty = append(empty, st.Ident)
		case carries(env, mark):
			out[st.PID] = st
		}
	})
	return out, empty
}

// envBuf holds any environment the tests give; a larger one is read in
// pieces.
const envBuf = 256 << 10

// readEnv reads pid's environment, each file in one read: the file reads
// the memory it opened on, which an exec drops, and a read in pieces across
// an exec returns the first piece alone, the marker (appended last) cut
// off. A zombie leader's is read from a live thread.
func readEnv(pid int, buf []byte) []byte {
	dir := "/proc/" + strconv.Itoa(pid)
	env := readOnce(dir+"/environ", buf)
	if len(env) == 0 {
		if tid := proc.LiveThread(pid); tid != 0 && tid != pid {
			env = readOnce(dir+"/task/"+strconv.Itoa(tid)+"/environ", buf)
		}
	}
	return env
}

// readOnce reads path in one read into buf; one larger than buf is read
// whole, in pieces.
func readOnce(path string, buf []byte) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	n, _ := f.Read(buf)
	if n == len(buf) {
		b, _ := os.ReadFile(path)
		return b
	}
	return buf[:n]
}

// emptyFor is how long a process's environment must read empty before
// Kill takes it for a process that has none (as some inits have), not one
// in an exec; noEnv remembers those, for every later Kill.
const emptyFor = time.Second

var noEnv = struct {
	sync.Mutex
	since map[proc.Ident]time.Time
}{since: map[proc.Ident]time.Time{}}

// Kill SIGKILLs every process that carries mark, through a pidfd opened
// after its start time was checked, until none is left and no process
// could still be in an exec (see look), within killBound.
func Kill(mark string) {
	for deadline := time.Now().Add(killBound); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		live, empty := look(mark)
		for _, st := range live {
			proc.Signal(st.Ident, syscall.SIGKILL)
		}
		if len(live) == 0 && !inExec(empty) {
			return
		}
	}
}

// killBound bounds Kill, for a process that does not die of SIGKILL.
const killBound = 10 * time.Second

// inExec reports whether any of the processes whose environment read
// empty has read so, look after look, for less than emptyFor.
func inExec(empty []proc.Ident) bool {
	noEnv.Lock()
	defer noEnv.Unlock()
	now := time.Now()
	since := make(map[proc.Ident]time.Time, len(empty))
	pending := false
	for _, id := range empty {
		t, ok := noEnv.since[id]
		if !ok {
			t = now
		}
		since[id] = t
		pending = pending || now.Sub(t) < emptyFor
	}
	noEnv.since = since // one that read otherwise starts again
	return pending
}
