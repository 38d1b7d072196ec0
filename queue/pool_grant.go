// pool_grant.go owns a pool hold's devices once taken: the tokens of all
// its devices as one Grant, the dead holders they hand over (one entry per
// dead hold, however many devices it held, marked reaped on every device
// it held, taken or not), and Release, devices first and the pool ticket
// last, whose removal wakes the pool's waiters.
package queue

import (
	"fmt"
	"sync"

	"github.com/gpu-hold/gpu-hold/internal/proc"
)

// PoolGrant is the devices of a pool hold, held. It is a Grant.
type PoolGrant struct {
	pw       *PoolWaiter
	devices  []int
	backfill bool
	decision Decision
	mu       sync.Mutex
	gs       []*grant // the taken devices' tokens
	others   []*grant // detached: the other devices' dead holders
	dead     []deadHold
	released bool
}

// deadHold is one dead holder across the pool's devices.
type deadHold struct {
	t     Ticket // Seq: unique in this grant (a device queue's own)
	key   holdKey
	parts []deadPart
}

type deadPart struct {
	g *grant
	t Ticket
}

type holdKey struct {
	holder proc.Ident
	holdID string
}

func keyOfTicket(t Ticket) holdKey { return holdKey{t.Holder, t.HoldID} }

func newPoolGrant(pw *PoolWaiter, d Decision, gs []*grant) (*PoolGrant, error) {
	g := &PoolGrant{pw: pw, devices: d.Devices, backfill: d.Backfill, decision: d, gs: gs}
	taken := map[int]bool{}
	for _, i := range d.Devices {
		taken[i] = true
	}
	for i, dq := range pw.p.devs {
		if taken[i] {
			continue
		}
		o, err := dq.ReapDead()
		if err != nil {
			g.Release()
			return nil, err
		}
		g.others = append(g.others, o.(*grant))
	}
	g.collect()
	return g, nil
}

// collect groups the dead holders of the taken devices by hold, with
// their entries on the other devices.
func (g *PoolGrant) collect() {
	byKey := map[holdKey]*deadHold{}
	seqs := map[uint64]bool{}
	var order []holdKey
	for _, dg := range g.gs {
		for _, t := range dg.Dead() {
			k := keyOfTicket(t)
			dh, ok := byKey[k]
			if !ok {
				dh = &deadHold{t: t, key: k}
				for seqs[dh.t.Seq] {
					dh.t.Seq++ // two devices' queues numbered two holds alike
				}
				seqs[dh.t.Seq] = true
				byKey[k] = dh
				order = append(order, k)
			}
			dh.parts = append(dh.parts, deadPart{dg, t})
		}
	}
	for _, og := range g.others {
		for _, t := range og.Dead() {
			if dh, ok := byKey[keyOfTicket(t)]; ok {
				dh.parts = append(dh.parts, deadPart{og, t})
			}
		}
	}
	for _, k := range order {
		g.dead = append(g.dead, *byKey[k])
	}
}

// Ticket is the pool ticket.
func (g *PoolGrant) Ticket() Ticket { return g.pw.Ticket() }

// Devices are the pool indices held.
func (g *PoolGrant) Devices() []int { return append([]int(nil), g.devices...) }

// Backfilled reports whether this hold started before the head.
func (g *PoolGrant) Backfilled() bool { return g.backfill }

// Decision is the schedule's decision that started this hold: for a
// backfill, the head it went before and that head's earliest start; else
// the tickets ahead that started along with it.
func (g *PoolGrant) Decision() Decision { return g.decision }

// Dead lists the dead holds of the taken devices, one ticket each.
func (g *PoolGrant) Dead() []Ticket {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]Ticket, len(g.dead))
	for i, d := range g.dead {
		out[i] = d.t
	}
	return out
}

// Reaped marks dead reaped on every device it held.
func (g *PoolGrant) Reaped(dead Ticket) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, d := range g.dead {
		if d.t.Seq != dead.Seq || d.t.Holder != dead.Holder {
			continue
		}
		for _, p := range d.parts {
			if err := p.g.Reaped(p.t); err != nil {
				return err
			}
		}
		g.dead = append(g.dead[:i], g.dead[i+1:]...)
		return nil
	}
	return fmt.Errorf("ticket %d is not a dead holder handed to this pool grant", dead.Seq)
}

// Unreaped returns the dead holds of which some device's entry is still
// dead and unreaped; the others are dropped.
func (g *PoolGrant) Unreaped() ([]Ticket, error) {
	still := map[*grant]map[uint64]bool{}
	for _, dg := range append(append([]*grant(nil), g.gs...), g.others...) {
		ts, err := dg.Unreaped()
		if err != nil {
			return nil, err
		}
		still[dg] = map[uint64]bool{}
		for _, t := range ts {
			still[dg][t.Seq] = true
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []Ticket
	kept := g.dead[:0]
	for _, d := range g.dead {
		parts := d.parts[:0]
		for _, p := range d.parts {
			if still[p.g][p.t.Seq] {
				parts = append(parts, p)
			}
		}
		if d.parts = parts; len(parts) > 0 {
			kept = append(kept, d)
			out = append(out, d.t)
		}
	}
	g.dead = kept
	return out, nil
}

// Release gives back every device, then removes the pool ticket. It is
// idempotent.
func (g *PoolGrant) Release() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.released {
		return nil
	}
	g.released = true
	var first error
	for _, dg := range g.gs {
		if err := dg.Release(); err != nil && first == nil {
			first = err
		}
	}
	if err := g.pw.Cancel(); err != nil && first == nil {
		first = fmt.Errorf("devices released, but cannot remove pool ticket %d: %v; remove it by hand", g.pw.Ticket().Seq, err)
	}
	return first
}
