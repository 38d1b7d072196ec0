// marked.go owns finding the bench's own processes: a /proc scan for live
// processes whose environment carries a marker (cached by pid and start
// time, so repeated scans during a storm stay cheap), and ending marked
// leftovers through verified pidfds. Nothing unmarked is ever signalled.
package main

import (
	"os"
	"syscall"
	"time"

	hproc "github.com/gpu-hold/gpu-hold/internal/proc"
)

// scanner finds live processes carrying one marker.
type scanner struct {
	key, value string
	cache      map[hproc.Ident]bool
	self       int
}

// newScanner looks for KEY=VALUE in environments.
func newScanner(key, value string) *scanner {
	return &scanner{key: key, value: value, cache: map[hproc.Ident]bool{}, self: os.Getpid()}
}

// live returns the live (not zombie) marked processes now.
func (s *scanner) live() []hproc.Ident {
	var out []hproc.Ident
	seen := make(map[hproc.Ident]bool)
	hproc.Walk(func(st hproc.Stat) {
		if st.PID == s.self {
			return
		}
		seen[st.Ident] = true
		m, ok := s.cache[st.Ident]
		if !ok {
			env, err := hproc.ReadFile(st.PID, "environ")
			if err != nil || len(env) == 0 {
				return // gone, a kernel thread, or in an exec; try again next scan
			}
			m = hproc.EnvHas(env, s.key, s.value)
			s.cache[st.Ident] = m
		}
		if m && !st.Dead() {
			out = append(out, st.Ident)
		}
	})
	for id := range s.cache {
		if !seen[id] {
			delete(s.cache, id)
		}
	}
	return out
}

// killMarked ends every live process carrying the bench's marker and
// returns how many it found. Marked gpu-hold processes get TERM first and a
// while to tear down (so they remove their cgroups and release); then
// whatever is left gets SIGKILL until none is left (bounded).
func (b *bench) killMarked() int {
	s := newScanner(markEnv, b.mark)
	found := map[hproc.Ident]bool{}
	var holds []hproc.Ident
	for _, id := range s.live() {
		found[id] = true
		if st, err := hproc.ReadStat(id.PID); err == nil && st.Start == id.Start && st.Comm == "gpu-hold" {
			hproc.Signal(id, syscall.SIGTERM)
			holds = append(holds, id)
		}
	}
	for end := time.Now().Add(30 * time.Second); len(holds) > 0 && time.Now().Before(end); {
		time.Sleep(20 * time.Millisecond)
		left := holds[:0]
		for _, id := range holds {
			if hproc.Alive(id) {
				left = append(left, id)
			}
		}
		holds = left
	}
	killInto(s, 10*time.Second, found)
	return len(found)
}

// killAll SIGKILLs what s finds until nothing is left or limit passes, and
// returns how many it found.
func killAll(s *scanner, limit time.Duration) int {
	found := map[hproc.Ident]bool{}
	killInto(s, limit, found)
	return len(found)
}

// killInto is killAll, adding what it finds to found.
func killInto(s *scanner, limit time.Duration, found map[hproc.Ident]bool) {
	end := time.Now().Add(limit)
	for time.Now().Before(end) {
		ids := s.live()
		if len(ids) == 0 {
			break
		}
		for _, id := range ids {
			found[id] = true
			hproc.Signal(id, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
