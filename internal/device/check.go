// check.go owns the check after teardown: the baseline of holders present
// before the grant, the bounded wait for the others to go, its outcome, and
// the unbounded wait of a hold that keeps its token while the device is held.
package device

import (
	"context"
	"errors"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/proc"
)

// Baseline is the set of device holders present before the hold was granted
// (system daemons, monitoring agents). They are not blamed on the payload.
// The zero value is an empty baseline.
type Baseline map[proc.Ident]struct{}

// NewBaseline records holders, by identity, as the baseline.
func NewBaseline(holders []Holder) Baseline {
	b := Baseline{}
	for _, h := range holders {
		b[h.Ident] = struct{}{}
	}
	return b
}

// Contains reports whether id was a holder before the grant.
func (b Baseline) Contains(id proc.Ident) bool {
	_, ok := b[id]
	return ok
}

// Filter returns the holders not in the baseline. A pid that was a baseline
// holder but now names another process (another start time) is kept.
func (b Baseline) Filter(holders []Holder) []Holder {
	var out []Holder
	for _, h := range holders {
		if !b.Contains(h.Ident) {
			out = append(out, h)
		}
	}
	return out
}

// deviceRescan bounds how long WaitHolders waits between scans: a
// holder may close the node without exiting, which no pidfd tells.
var deviceRescan = 250 * time.Millisecond

// WaitHolders scans for holders of patterns outside baseline until
// none is left or bound has passed, and returns those left (nil when none).
// Between scans it waits on the holders' pidfds, rescanning as soon as one
// exits and at least every 250ms. A bound <= 0 scans once. When ctx ends it
// returns the holders of the last scan and ctx's error.
func WaitHolders(ctx context.Context, patterns []string, baseline Baseline, bound time.Duration) ([]Holder, error) {
	deadline := time.Now().Add(bound)
	for {
		hs, err := ScanHolders(patterns)
		if err != nil {
			return nil, err
		}
		hs = baseline.Filter(hs)
		if len(hs) == 0 {
			return nil, nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return hs, nil
		}
		if err := waitAnyExit(ctx, hs, min(left, deviceRescan)); err != nil {
			return hs, err
		}
	}
}

// waitAnyExit waits until one of the holders exits, timeout passes or ctx
// ends (its error is returned).
func waitAnyExit(ctx context.Context, hs []Holder, timeout time.Duration) error {
	var fds []unix.PollFd
	seen := map[proc.Ident]bool{}
	for _, h := range hs {
		if seen[h.Ident] {
			continue
		}
		seen[h.Ident] = true
		ph, err := proc.Open(h.Ident)
		if errors.Is(err, proc.ErrGone) {
			closeAll(fds)
			return ctx.Err() // one already left: rescan now
		}
		if err != nil {
			continue // cannot watch it; the rescan interval still covers it
		}
		fds = append(fds, unix.PollFd{Fd: int32(ph.FD), Events: unix.POLLIN})
	}
	defer closeAll(fds)
	_, err := proc.Poll(ctx, fds, timeout)
	return err
}

func closeAll(fds []unix.PollFd) {
	for _, p := range fds {
		unix.Close(int(p.Fd))
	}
}

// keepRecheck is how often WaitFree reads again the fd tables of the
// holders it waits for: closing the node without exiting is a change no
// pidfd tells. Only those holders are read, not every process: the wait
// may last hours, and a walk of a large host's /proc is not cheap.
var keepRecheck = time.Second

// WaitFree waits, with no bound, until no process outside baseline holds
// one of patterns' nodes: the wait of a hold that does not hand its token on
// while the device is held. held are the holders last found. Between scans
// it waits on their pidfds, and every keepRecheck reads their own fd tables
// again; an exit, or any change among them, brings a full scan (which finds
// a process the file was passed to, by fork or over a socket). changed, when
// not nil, is called with the holders of a full scan that differ from
// those before. When ctx ends it returns the holders left and ctx's error.
func WaitFree(ctx context.Context, patterns []string, baseline Baseline, held []Holder, changed func([]Holder)) ([]Holder, error) {
	hs := held
	for len(hs) > 0 {
		if err := waitAnyExit(ctx, hs, keepRecheck); err != nil {
			return hs, err
		}
		if stillHeld(patterns, baseline, hs) {
			continue
		}
		now, err := ScanHolders(patterns)
		if err != nil {
			return hs, err
		}
		now = baseline.Filter(now)
		if changed != nil && len(now) > 0 && !sameHolders(now, hs) {
			changed(now)
		}
		hs = now
	}
	return nil, nil
}

// stillHeld reports whether the holders hs, read again one by one, still
// hold exactly what they held.
func stillHeld(patterns []string, baseline Baseline, hs []Holder) bool {
	nodes, err := Expand(patterns)
	if err != nil {
		return false // the full scan says what is wrong
	}
	pids := make([]int, 0, len(hs))
	for _, h := range hs {
		pids = append(pids, h.PID)
	}
	return sameHolders(baseline.Filter(scanPIDs(nodes, pids)), hs)
}

// sameHolders reports whether a and b are the same (process, node) pairs.
func sameHolders(a, b []Holder) bool {
	sa, sb := holdings(a), holdings(b)
	if len(sa) != len(sb) {
		return false
	}
	for k := range sa {
		if !sb[k] {
			return false
		}
	}
	return true
}

// holding is one process holding one node.
type holding struct {
	id   proc.Ident
	node string
}

func holdings(hs []Holder) map[holding]bool {
	set := make(map[holding]bool, len(hs))
	for _, h := range hs {
		set[holding{h.Ident, h.Node}] = true
	}
	return set
}

// Check is the outcome of the device-holder check after teardown.
type Check struct {
	Policy   Policy        `json:"policy"`
	Patterns []string      `json:"patterns"`
	Holders  []Holder      `json:"holders,omitempty"` // outside the baseline, still there at the end
	Waited   time.Duration `json:"waited_ns"`
}

// Failed reports whether the policy is fail and holders are left: the hold
// then exits 73 (hold.ExitDeviceHolders, which device cannot import);
// otherwise the hold's own code stands.
func (c Check) Failed() bool {
	return c.Policy == PolicyFail && len(c.Holders) > 0
}

// KeepsToken reports whether holders are left that the policy does not
// hand the token on beside (Policy.KeepsToken): the hold keeps its token
// until they go (WaitFree).
func (c Check) KeepsToken() bool {
	return c.Policy.KeepsToken() && len(c.Holders) > 0
}

// CheckHolders runs the check under policy: warn scans once; wait and
// fail wait up to bound (WaitHolders; the hold gives fail none) for the
// holders outside baseline to go. The holders left are in the result;
// Failed and KeepsToken say what the policy makes of them.
func CheckHolders(ctx context.Context, policy Policy, patterns []string, baseline Baseline, bound time.Duration) (Check, error) {
	if policy == "" {
		policy = PolicyWarn
	}
	c := Check{Policy: policy, Patterns: patterns}
	if policy == PolicyWarn {
		bound = 0
	}
	t0 := time.Now()
	hs, err := WaitHolders(ctx, patterns, baseline, bound)
	c.Holders, c.Waited = hs, time.Since(t0)
	return c, err
}
