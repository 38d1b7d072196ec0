// withhold.go owns the token kept while the device is held: under
// --device-holders=wait|fail, a hold whose device a process outside its
// lineage still holds after teardown does not hand its token on until that
// process lets go. It is the step a persistent quarantine of the device
// (with its reason, for queue, doctor and metrics to show) is to replace:
// checkDevices hands it the check and the baseline, and it leaves the
// result and the record as the check set them, but for how the keeping
// ended. The queue is told what the token is kept for, for gpu-hold queue
// and the waiters to show.
package hold

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/device"
	"github.com/gpu-hold/gpu-hold/internal/record"
	"github.com/gpu-hold/gpu-hold/internal/termsafe"
	"github.com/gpu-hold/gpu-hold/queue"
)

// withhold keeps the token until no holder outside baseline is left
// (device.WaitFree), saying once what it waits for, and again only when
// the device changes hands. A signal (signalled returns it), a lost lease
// or ctx's end hands the token on with the holders left: a hold keeps its
// token only while it lives, and the next hold's payload then starts
// beside them (a successor does not check the device before its payload
// starts: docs/SECURITY.md says so).
func (h *holdRun) withhold(ctx context.Context, c device.Check, baseline device.Baseline, signalled func() os.Signal) {
	log := h.o.Log
	ctx, lost := h.unlessLost(ctx)
	log.Error().Str("policy", string(c.Policy)).Interface("holders", c.Holders).
		Msg(keepingLine(c.Holders) + "; handed on once they let go (TERM, INT, HUP or gpu-hold cancel hands it on now)")
	t0 := time.Now()
	h.noteKeeping(t0, c.Holders)
	left, err := device.WaitFree(ctx, c.Patterns, baseline, c.Holders, func(now []device.Holder) {
		log.Error().Interface("holders", now).Msg("the device changed hands: " + keepingLine(now))
		h.noteKeeping(t0, now)
	})
	kept := time.Since(t0)
	h.noteKeeping(t0, nil)
	if len(left) == 0 {
		log.Info().Dur("kept_ms", kept).Msg("the device holders let go; handing the token on")
		h.recordHolders(c.Holders, nil, kept, "")
		return
	}
	why := handedOnWhy(signalled(), lost(), err)
	log.Error().Dur("kept_ms", kept).Interface("holders", left).
		Msg("handing the token on while the device is still held (" + why + "): the next hold's payload starts beside them")
	h.recordHolders(c.Holders, left, kept, why)
}

// noteKeeping tells the queue what the token is kept for since t0 (hs
// nil: no longer kept), where its backend can show it (gpu-hold queue,
// the waiters' status line).
func (h *holdRun) noteKeeping(t0 time.Time, hs []device.Holder) {
	n, ok := h.grant.(queue.KeepingNoter)
	if !ok {
		return
	}
	var k *queue.Keeping
	if len(hs) > 0 {
		k = &queue.Keeping{Since: t0}
		for _, dh := range hs {
			k.Holders = append(k.Holders, queue.KeptNode{Node: dh.Node, PID: dh.PID, UID: dh.UID, User: dh.User, Command: dh.Command})
		}
	}
	if err := n.NoteKeeping(k); err != nil {
		h.o.Log.Warn().Err(err).Msg("gpu-hold queue and the waiters do not see why the token is kept")
	}
}

// keepingLine says what the token is kept for: each node and its holder.
func keepingLine(hs []device.Holder) string {
	parts := make([]string, 0, len(hs))
	for _, dh := range hs {
		who := dh.User
		if who == "" {
			who = fmt.Sprintf("uid %d", dh.UID)
		}
		// The command line and the node's path are another user's text.
		parts = append(parts, fmt.Sprintf("%s held by pid %d (%s: %s)", termsafe.Text(dh.Node), dh.PID, who, termsafe.Text(dh.Command)))
	}
	return "keeping the token: " + strings.Join(parts, ", ") + " outside the lineage"
}

// handedOnWhy says why the token went on with the device still held.
func handedOnWhy(sig os.Signal, lost bool, err error) string {
	switch {
	case sig == CancelSignal:
		return "told to by gpu-hold cancel"
	case sig != nil:
		return "told to by " + unix.SignalName(sig.(syscall.Signal))
	case lost:
		return "the token's lease was lost"
	case err != nil:
		return fmt.Sprintf("cannot watch the device: %v", err)
	}
	return "the hold was ended"
}

// unlessLost is ctx, ended too when the grant's lease is lost (etcd): a
// token no longer held is not kept. lost reports whether that happened.
func (h *holdRun) unlessLost(ctx context.Context) (_ context.Context, lost func() bool) {
	c := h.lostC()
	if c == nil {
		return ctx, func() bool { return false }
	}
	ctx, cancel := context.WithCancel(ctx)
	got := make(chan bool, 1)
	go func() {
		select {
		case <-c:
			got <- true
			cancel()
		case <-ctx.Done():
			got <- false
		}
	}()
	return ctx, func() bool { cancel(); return <-got }
}

// heldEntry is a device holder as the record has it: what the check found,
// and, when the token was kept for the device, how that ended.
type heldEntry struct {
	device.Holder
	// Kept is how long the token was kept for the device (0: not kept).
	Kept time.Duration `json:"kept_ns,omitempty"`
	// HandedOnHeld says why the token went on while this process still
	// held the device (empty: it let go first, or the token was not kept).
	HandedOnHeld string `json:"handed_on_held,omitempty"`
}

// recordHolders puts the holders found after teardown on record, with
// those still holding the device when the token went on (left, and why);
// a holder the device passed to while the token was kept is added.
func (h *holdRun) recordHolders(found, left []device.Holder, kept time.Duration, why string) {
	type key struct {
		pid   int
		start uint64
		node  string
	}
	still := map[key]bool{}
	for _, dh := range left {
		still[key{dh.PID, dh.Start, dh.Node}] = true
	}
	recs := make([]any, 0, len(found)+len(left))
	for _, dh := range found {
		k := key{dh.PID, dh.Start, dh.Node}
		e := heldEntry{Holder: dh, Kept: kept}
		if still[k] {
			e.HandedOnHeld = why
			delete(still, k)
		}
		recs = append(recs, e)
	}
	for _, dh := range left {
		if still[key{dh.PID, dh.Start, dh.Node}] {
			recs = append(recs, heldEntry{Holder: dh, Kept: kept, HandedOnHeld: why})
		}
	}
	h.rec.update(func(hi *record.HoldInfo) { hi.DeviceHolders = recs })
}
