// enforce.go owns --enforce: an intruder is ended through a pidfd opened
// after its identity (pid, start time) was checked, TERM first, KILL after
// the grace, each step in the audit log. Just before each signal it is
// judged again: a process that is now the token holder's lineage or
// allow-listed, or that the guard can no longer identify, is left alone.
package guard

import (
	"context"
	"errors"
	"syscall"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/proc"
)

// killWait bounds the wait for an intruder's exit after KILL.
const killWait = 5 * time.Second

// end ends intruder in (found as k) and records each step.
func (g *Guard) end(ctx context.Context, k key, in intruder) {
	defer g.ending.Done()
	e := auditEntry{Resource: k.resource, Node: in.Node, Proc: in}
	log := g.o.Log.With().Str("resource", k.resource).Int("pid", k.id.PID).Uint64("start", k.id.Start).Str("user", in.User).Str("command", in.Command).Logger()
	if why := g.spare(k, in); why != "" {
		g.refuse(k, e, why)
		return
	}
	h, err := proc.Open(k.id)
	if err != nil {
		g.refuse(k, e, "cannot identify it: its pid no longer names the process seen (it exited, or the pid was reused)")
		return
	}
	defer h.Close()
	if !g.signal(h, syscall.SIGTERM, e, "term") {
		return
	}
	log.Warn().Dur("grace_ms", g.o.Grace).Msg("intruder sent TERM")
	if g.waitExit(ctx, h, g.o.Grace) {
		g.exited(e, log.Info(), "intruder exited after TERM")
		return
	}
	if why := g.spare(k, in); why != "" {
		g.refuse(k, e, why)
		return
	}
	if !g.signal(h, syscall.SIGKILL, e, "kill") {
		return
	}
	log.Warn().Msg("intruder sent KILL after the grace")
	if g.waitExit(context.Background(), h, killWait) {
		g.exited(e, log.Info(), "intruder exited after KILL")
		return
	}
	e.Action, e.Reason = "survived", "still alive "+killWait.String()+" after KILL (uninterruptible sleep?)"
	g.record(e)
	log.Error().Msg("intruder still alive after KILL: it is named again on the next scan")
}

// spare says why k must not be ended now, or "".
func (g *Guard) spare(k key, in intruder) string {
	ln := g.lineageNow(k.resource)
	defer ln.close()
	switch {
	case k.id.PID == 1 || k.id == g.self:
		return "it is init or the guard itself"
	case g.ownsAll(ln, k, in):
		return "it is in the lineage of the resource's token holder"
	case g.o.Allow.allows(k.id, in.UID):
		return "it is allow-listed"
	}
	return ""
}

// lineageNow reads the lineages of resource's holders (serialised with
// the scans'): its own token's, and, for a pool, each device's.
func (g *Guard) lineageNow(resource string) lineageSet {
	g.qmu.Lock()
	defer g.qmu.Unlock()
	var set lineageSet
	for _, name := range g.queueNames[resource] {
		if l := g.lineageOf(name); l.holder.PID != 0 {
			l.queue = name
			set = append(set, l)
		}
	}
	return set
}

// ownsAll reports whether every node intruder k holds is its own holder's:
// one device's node its holder's, a shared node any holder's.
func (g *Guard) ownsAll(ln lineageSet, k key, in intruder) bool {
	if len(in.Nodes) == 0 {
		return ln.has(k.id)
	}
	for _, n := range in.Nodes {
		if !ln.hasFor(k.id, g.devQueues.owner(k.resource, n)) {
			return false
		}
	}
	return true
}

// signal sends sig through h and records it as action; false when the
// process is gone (recorded as exited) or the signal failed.
func (g *Guard) signal(h *proc.Handle, sig syscall.Signal, e auditEntry, action string) bool {
	err := h.Signal(sig)
	switch {
	case errors.Is(err, proc.ErrGone):
		g.exited(e, g.o.Log.Info(), "intruder exited before it was signalled")
		return false
	case err != nil:
		e.Action, e.Reason = "refused", "signal failed: "+err.Error()
		g.record(e)
		g.o.Log.Error().Err(err).Int("pid", h.PID).Msg("cannot signal the intruder (is the guard root?)")
		return false
	}
	g.mu.Lock()
	g.stats.ended[[2]string{e.Resource, action}]++
	g.mu.Unlock()
	e.Action = action
	g.record(e)
	return true
}

// waitExit waits for h's exit up to limit, or until ctx ends.
func (g *Guard) waitExit(ctx context.Context, h *proc.Handle, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for {
		step := min(time.Until(deadline), 200*time.Millisecond)
		if h.WaitExit(max(step, 0)) {
			return true
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return false
		}
	}
}

func (g *Guard) exited(e auditEntry, ev interface{ Msg(string) }, msg string) {
	e.Action = "exited"
	g.record(e)
	ev.Msg(msg)
}

// refuse records an end not done, and lets the next scan judge k afresh.
func (g *Guard) refuse(k key, e auditEntry, why string) {
	e.Action, e.Reason = "refused", why
	g.record(e)
	g.o.Log.Info().Str("resource", k.resource).Int("pid", k.id.PID).Str("why", why).Msg("intruder not ended")
	g.mu.Lock()
	if in, ok := g.intruders[k]; ok {
		in.ending = false
	}
	g.mu.Unlock()
}
