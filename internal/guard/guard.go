// Package guard is `gpu-hold guard`: a long-running service that names,
// and with Enforce ends, every process holding one of a resource's device
// nodes that is neither in the lineage of the resource's current token
// holder nor on the allow-list. guard.go owns the service: its options,
// the scan loop (a /proc fd scan every Period), and what each scan keeps
// of the intruders it found (first seen, device-seconds per user).
//
// What the guard can verify decides what it spares: the holder is the
// ticket the queue proves holds the token (its lock), its lineage is what
// the kernel says descends from it or sits in its cgroup (lineage.go);
// an environment variable anyone can set (GPU_HOLD_ID) is not evidence.
package guard

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/gpu-hold/gpu-hold/internal/device"
	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/queue"
)

// Options configure a guard.
type Options struct {
	Dir        string   // the queue directory: the resources, their holders
	Resources  []string // resources to watch ("" or empty: every one with device nodes)
	Period     time.Duration
	Enforce    bool          // end intruders (TERM, Grace, KILL)
	Grace      time.Duration // TERM to KILL
	Allow      *AllowList    // nil: nothing is allow-listed
	AuditPath  string        // JSONL audit of every action ("": no audit; required with Enforce)
	MetricsDir string        // the textfile (gpu_hold_guard.prom) goes here ("": none)
	Once       bool          // one scan, then return
	DenyAtOpen bool          // attach the device filter (kernel.go)
	// OpenQueue opens a resource's queue when it is not the directory's
	// (the etcd fleet queue); nil: the queue directory.
	OpenQueue func(resource string) (queue.Queue, error)
	// Host is the name this host's tickets carry: a holder on another
	// host has no lineage here ("": not checked, the directory's case).
	Host string
	Log  zerolog.Logger
}

// Guard is a running guard.
type Guard struct {
	o      Options
	res    []device.Resource
	qmu    sync.Mutex // queues, and the reads of the holders
	queues map[string]queue.Queue
	// queueNames are the queues whose holders a resource's nodes belong
	// to: its own and, for a pool of several devices, each device's.
	queueNames map[string][]string
	// devQueues tells, for a pool, whose a device's own node is.
	devQueues devQueues
	audit     *audit
	bootWall  time.Duration
	mu        sync.Mutex
	intruders map[key]*intruder
	stats     stats
	ending    sync.WaitGroup
	self      proc.Ident
	kern      *kernel // the device filter, with DenyAtOpen
}

// key names one intruder on one resource.
type key struct {
	resource string
	id       proc.Ident
}

// intruder is a process found holding a resource's device without the
// token, as the last scan saw it.
type intruder struct {
	device.Holder          // the first node found; Nodes has them all
	Resource      string   // the resource whose node it holds
	Nodes         []string // every node of the resource it holds
	Exe           string
	First, Last   time.Time
	ending        bool // an end is under way (enforce.go)
}

// New checks o and prepares a guard.
func New(o Options) (*Guard, error) {
	if o.Period <= 0 {
		return nil, errors.New("--period must be positive (for example --period 2s)")
	}
	if o.Enforce && o.AuditPath == "" {
		return nil, errors.New("--enforce needs --audit FILE: every process the guard ends is recorded there")
	}
	res, err := watched(o)
	if err != nil {
		return nil, err
	}
	self, err := proc.Self()
	if err != nil {
		return nil, fmt.Errorf("cannot read the guard's own identity from /proc: %v", err)
	}
	g := &Guard{o: o, res: res, queues: map[string]queue.Queue{}, queueNames: map[string][]string{}, intruders: map[key]*intruder{}, bootWall: proc.BootToWall(), self: self}
	pools := map[string]device.Pool{}
	for _, r := range res {
		g.queueNames[r.Name] = []string{r.Name}
		if p := device.PoolOf(r, "/"); p.Multi() {
			pools[r.Name] = p
			for _, d := range p.Devices {
				g.queueNames[r.Name] = append(g.queueNames[r.Name], device.QueueName(r.Name, d))
			}
		}
	}
	g.devQueues = devQueues(pools)
	g.stats.untokened = map[[2]string]float64{}
	g.stats.ended = map[[2]string]float64{}
	g.stats.allowed = map[string]int{}
	if o.AuditPath != "" {
		if g.audit, err = openAudit(o.AuditPath); err != nil {
			return nil, err
		}
	}
	if os.Geteuid() != 0 {
		o.Log.Warn().Msg("the guard is not root: it sees only its own user's processes, and cannot end others'; run it as root (dist/systemd/gpu-hold-guard.service)")
	}
	return g, nil
}

// watched is the resources the guard watches: those named, else every
// configured one with device nodes.
func watched(o Options) ([]device.Resource, error) {
	all, err := device.LoadResourcesWarn(o.Dir, func(msg string) { o.Log.Warn().Msg(msg) })
	if err != nil {
		return nil, err
	}
	var out []device.Resource
	names := o.Resources
	if len(names) == 0 || len(names) == 1 && names[0] == "" {
		names = nil
		for n, r := range all {
			if len(r.Devices) > 0 {
				names = append(names, n)
			}
		}
		sort.Strings(names)
	}
	for _, n := range names {
		if err := queue.ValidResource(n); err != nil {
			return nil, err
		}
		r := device.LookupResource(all, n)
		if len(r.Devices) == 0 {
			return nil, fmt.Errorf("resource %s has no device nodes to guard: give it some in %s/%s", n, o.Dir, device.ResourcesFile)
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil, errors.New("no resource with device nodes to guard: name one with -r, or configure " + device.ResourcesFile)
	}
	return out, nil
}

// Run scans every Period until ctx ends (or once, with Once), then waits
// for the ends under way.
func (g *Guard) Run(ctx context.Context) error {
	defer g.close()
	if g.o.DenyAtOpen {
		if err := g.openKernel(ctx); err != nil {
			return err
		}
	}
	names := make([]string, len(g.res))
	for i, r := range g.res {
		names[i] = r.Name
	}
	g.o.Log.Info().Strs("resources", names).Dur("period_ms", g.o.Period).Bool("enforce", g.o.Enforce).Msg("guard started")
	t := time.NewTicker(g.o.Period)
	defer t.Stop()
	for {
		g.scan(ctx)
		if g.o.Once {
			return nil
		}
		select {
		case <-ctx.Done():
			g.o.Log.Info().Msg("guard stopped")
			return nil
		case <-t.C:
		}
	}
}

func (g *Guard) close() {
	g.ending.Wait()
	g.closeKernel()
	for _, q := range g.queues {
		if c, ok := q.(interface{ Close() error }); ok {
			c.Close()
		}
	}
	if g.audit != nil {
		g.audit.close()
	}
}

// scan is one pass: every watched resource's holders, each judged, then
// the metrics.
func (g *Guard) scan(ctx context.Context) {
	start := time.Now()
	seen := map[key]bool{}
	for _, r := range g.res {
		g.scanResource(ctx, r, start, seen)
	}
	g.forget(seen, start)
	if g.kern != nil {
		g.refreshKernel()
	}
	g.mu.Lock()
	g.stats.scans++
	g.stats.lastScan, g.stats.scanTook = start, time.Since(start)
	g.mu.Unlock()
	g.export()
}

// scanResource judges the holders of one resource's nodes.
func (g *Guard) scanResource(ctx context.Context, r device.Resource, now time.Time, seen map[key]bool) {
	holders, err := device.ScanHolders(r.Devices)
	if err != nil {
		g.o.Log.Error().Err(err).Str("resource", r.Name).Msg("cannot scan for the device's holders; retrying next period")
		return
	}
	if len(holders) == 0 {
		g.mu.Lock()
		g.stats.allowed[r.Name] = 0
		g.mu.Unlock()
		return
	}
	ln := g.lineageNow(r.Name)
	defer ln.close()
	allowed := 0
	for _, h := range holders {
		if h.Ident == g.self || h.PID == 1 {
			continue
		}
		switch g.judge(h, ln, g.devQueues.owner(r.Name, h.Node)) {
		case verdictLineage:
			continue
		case verdictAllowed:
			allowed++
			continue
		}
		k := key{r.Name, h.Ident}
		seen[k] = true
		g.note(ctx, k, h, now)
	}
	g.mu.Lock()
	g.stats.allowed[r.Name] = allowed
	g.mu.Unlock()
}

// verdict is what the guard makes of one holder.
type verdict int

const (
	verdictIntruder verdict = iota
	verdictLineage          // in the current holder's lineage
	verdictAllowed          // on the allow-list
)

// judge says whether holder h is the token holder's (that of queue owner,
// "": any of ln's), allowed, or neither.
func (g *Guard) judge(h device.Holder, ln lineageSet, owner string) verdict {
	if ln.hasFor(h.Ident, owner) {
		return verdictLineage
	}
	if g.o.Allow.allows(h.Ident, h.UID) {
		return verdictAllowed
	}
	return verdictIntruder
}

// note records intruder k (one entry per node it holds), logs it the
// first time, counts its device-seconds, and starts its end under Enforce.
func (g *Guard) note(ctx context.Context, k key, h device.Holder, now time.Time) {
	g.mu.Lock()
	in, ok := g.intruders[k]
	if !ok {
		in = &intruder{Holder: h, Resource: k.resource, First: now, Exe: exeOf(h.Ident)}
		g.intruders[k] = in
	}
	if in.Last != now {
		// A new scan: the nodes are counted afresh.
		if !in.Last.IsZero() {
			g.stats.untokened[[2]string{k.resource, userOf(in.Holder)}] += now.Sub(in.Last).Seconds() * float64(len(in.Nodes))
		}
		in.Nodes, in.Last, in.DRM = nil, now, nil
	}
	in.Nodes = append(in.Nodes, h.Node)
	for kk, v := range h.DRM {
		if in.DRM == nil {
			in.DRM = map[string]uint64{}
		}
		in.DRM[kk] += v
	}
	start := g.o.Enforce && !in.ending
	if start {
		in.ending = true
	}
	first := !ok
	snapshot := *in
	g.mu.Unlock()
	if first {
		g.o.Log.Warn().Str("resource", k.resource).Str("node", h.Node).Int("pid", h.PID).Uint64("start", h.Start).
			Time("started", h.Ident.Started(g.bootWall)).Int("uid", h.UID).Str("user", h.User).Str("command", h.Command).
			Str("exe", snapshot.Exe).Interface("drm", h.DRM).Msg("intruder: a process holds the device without the token")
		g.record(auditEntry{Action: "seen", Resource: k.resource, Node: h.Node, Proc: snapshot})
	}
	if start {
		g.ending.Add(1)
		go g.end(ctx, k, snapshot)
	}
}

// forget drops the intruders the last scan did not see, logging how long
// each held the device. Device-seconds count from one sighting to the
// next, so the time after the last one (less than a period) is not
// counted.
func (g *Guard) forget(seen map[key]bool, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for k, in := range g.intruders {
		if seen[k] {
			continue
		}
		delete(g.intruders, k)
		g.o.Log.Info().Str("resource", k.resource).Int("pid", k.id.PID).Uint64("start", k.id.Start).Str("user", in.User).
			Dur("held_ms", now.Sub(in.First)).Msg("intruder no longer holds the device")
	}
}

// userOf names a holder's user for the per-user metric.
func userOf(h device.Holder) string {
	if h.User != "" {
		return h.User
	}
	return fmt.Sprintf("uid%d", h.UID)
}
