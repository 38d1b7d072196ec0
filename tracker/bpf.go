// bpf.go owns the eBPF backend: each hold loads (or takes a spare of) its
// own copy of the lineage programs (package bpf), names itself the launcher
// so that the payload is a member from its fork on, reads the kernel's
// lineage map for Live, and turns the ring buffer's events into lineage
// events for the record.
package tracker

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpu-hold/gpu-hold/bpf"
	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/record"
)

type bpfTracker struct {
	noCaps // has and cgroup: a live hold asks Live
	opts   Options
	self   int
	l      *bpf.Lineage
	rd     *bpf.Reader
	// bootToWall converts CLOCK_BOOTTIME ns (event times) to wall time.
	bootToWall time.Duration

	changed  chan struct{}
	begin    chan struct{} // closed when reading starts (see startBPFTracker)
	stop     chan struct{} // closed by Close: one last drain, then read returns
	done     chan struct{} // closed when read has returned
	started  sync.Once
	finished sync.Once
	close    sync.Once
	drains   atomic.Int64 // drains done (a queued hold does none)

	sinkMu sync.Mutex // Sink calls are serialized (reader goroutine and Live)

	mu     sync.Mutex
	groups map[int]group   // last known group and session of each live member
	count  record.Counters // last counters read
	bad    uint64          // ring buffer records that did not decode (counted as lost)
}

type group struct {
	start     uint64
	pgid, sid int
}

func newBPFTracker(opts Options) (*bpfTracker, error) {
	if err := CheckHostPidNS(); err != nil {
		return nil, &ProbeError{Backend: BackendBPF, Reason: err.Error()}
	}
	primeGoPidfdCheck()
	l, err := loadLineage(opts)
	if err != nil {
		return nil, err
	}
	return startBPFTracker(l, opts, false)
}

// startBPFTracker starts reading a loaded (or opened) lineage's events: at
// once when now (a pinned lineage with members), else from Prepare on (a
// hold that waits in the queue has nothing to read, and does not wake).
func startBPFTracker(l *bpf.Lineage, opts Options, now bool) (*bpfTracker, error) {
	// Open the ring buffer reader before anything is admitted.
	rd, err := l.NewReader()
	if err != nil {
		l.Close()
		return nil, err
	}
	t := &bpfTracker{
		opts:       opts,
		self:       os.Getpid(),
		l:          l,
		rd:         rd,
		bootToWall: proc.BootToWall(),
		changed:    make(chan struct{}, 1),
		begin:      make(chan struct{}),
		stop:       make(chan struct{}),
		done:       make(chan struct{}),
		groups:     make(map[int]group),
	}
	if now {
		t.startReading()
	}
	go t.read()
	return t, nil
}

func (t *bpfTracker) Backend() string { return BackendBPF }

// Prepare names the hold the launcher: the next child it forks (the payload,
// in cmd.Start) is a member from the fork on, before its first instruction.
func (t *bpfTracker) Prepare(cmd *exec.Cmd) error {
	t.startReading()
	self, err := proc.Self()
	if err != nil {
		return fmt.Errorf("reading the hold's own start time: %w", err)
	}
	return t.l.SetLauncher(self.PID, self.Start)
}

// Started stops admitting the hold's children and checks that the kernel
// admitted the payload (the launcher's last child) as root.
func (t *bpfTracker) Started(root proc.Ident) error {
	if err := t.l.SetLauncher(0, 0); err != nil {
		return err
	}
	r, err := t.l.Root()
	if err != nil {
		return err
	}
	switch {
	case r.PID == 0:
		return fmt.Errorf("the BPF lineage never saw the hold fork the payload (pid %d); use --track=proc, and report this", root.PID)
	case r.PID != root.PID:
		return fmt.Errorf("the BPF lineage admitted pid %d as the payload, but the payload is pid %d: gpu-hold seems to run in a pid namespace other than the host's, which the BPF tracker cannot follow; use --track=proc", r.PID, root.PID)
	case root.Start != 0 && bpf.NsToTicks(r.StartNs) != root.Start:
		return fmt.Errorf("the BPF lineage admitted pid %d started at tick %d, but the payload started at tick %d; use --track=proc, and report this", r.PID, bpf.NsToTicks(r.StartNs), root.Start)
	}
	return nil
}

// Live reads the lineage map and keeps each member whose /proc entry has the
// start time the kernel recorded (so a recycled pid is never returned) and
// is not a zombie.
func (t *bpfTracker) Live() ([]proc.Stat, error) {
	ms, err := t.l.Members()
	if err != nil {
		return nil, err
	}
	var errs []error
	live := make([]proc.Stat, 0, len(ms))
	for _, m := range ms {
		if m.PID == t.self {
			continue
		}
		st, err := proc.ReadStat(m.PID)
		if err != nil {
			if !errors.Is(err, proc.ErrGone) {
				errs = append(errs, err)
			}
			continue
		}
		if st.Start != m.StartTicks() || st.Dead() {
			continue
		}
		live = append(live, st)
		t.regroup(time.Now(), st.Ident, st.PPID, st.PGID, st.SID)
	}
	return live, errors.Join(errs...)
}

// LiveIn is Live over the caller's walk: no stat is read per member the
// walk saw. A member it did not see (born after it listed /proc) is read
// on its own: a process that forks and exits in a loop is never in a walk.
func (t *bpfTracker) LiveIn(s *proc.Snapshot) []proc.Stat {
	if t.empty() {
		return nil
	}
	ms, err := t.l.Members()
	if err != nil {
		live, _ := t.Live()
		return live
	}
	live := make([]proc.Stat, 0, len(ms))
	now := time.Now()
	for _, m := range ms {
		if m.PID == t.self {
			continue
		}
		id := proc.Ident{PID: m.PID, Start: m.StartTicks()}
		st, ok := s.Get(id)
		if _, listed := s.ByPID[m.PID]; !listed {
			st, ok = proc.LiveStat(id)
		}
		if !ok {
			continue
		}
		live = append(live, st)
		t.regroup(now, st.Ident, st.PPID, st.PGID, st.SID)
	}
	return live
}

// empty reports whether the programs' count says the lineage map is empty:
// one lookup, where reading the map walks every one of its buckets.
func (t *bpfTracker) empty() bool {
	c, err := t.l.Counters()
	return err == nil && c.Live == 0
}

// account reads the lineage map: a member's entry goes when its last
// thread exits, so an empty map (and no member lost to overflow) means no
// member is alive, wherever it went. Once sealed, an entry that a read of
// the map misses while the map changes is a child killed at its birth.
func (t *bpfTracker) account() (some, known bool, err error) {
	c, cerr := t.l.Counters()
	if cerr != nil || c.Overflow > 0 {
		return false, false, nil
	}
	if c.Live == 0 {
		return false, true, nil
	}
	ms, merr := t.l.Members()
	if merr != nil {
		return false, false, nil
	}
	return slices.ContainsFunc(ms, func(m bpf.Member) bool { return m.PID != t.self }), true, nil
}

// Changed is signalled on every fork and exit the kernel reports.
func (t *bpfTracker) Changed() <-chan struct{} { return t.changed }

// Seal makes the kernel kill a forking member at the fork and, under
// bpf.SealBirth, its child at birth, from now on.
func (t *bpfTracker) Seal() error { return t.l.Seal() }

// sealMode is the seal the lineage was loaded with ("" when opened from
// a dead holder's pins).
func (t *bpfTracker) sealMode() string { return string(t.l.SealMode()) }

// snapshot is empty: LiveIn reads the members from the kernel's own
// account, one by one.
func (t *bpfTracker) snapshot() (*proc.Snapshot, bool) { return proc.SnapshotOf(nil), true }

func (t *bpfTracker) Counters() record.Counters {
	c, err := t.l.Counters()
	t.mu.Lock()
	defer t.mu.Unlock()
	if err == nil {
		t.count = record.Counters{LostEvents: c.Lost + t.bad, MapOverflow: c.Overflow, Members: c.Admitted}
	}
	return t.count
}

// Close reads the events still in the ring buffer, then gives the lineage
// back to the spares, attached, when it can be one (bpf.Lineage.Recycle),
// else detaches the programs and frees the kernel objects (a pinned
// lineage stays in the kernel until unpinned).
func (t *bpfTracker) Close() error {
	var err error
	t.close.Do(func() {
		t.finish()
		_, err = t.l.Recycle(t.rd)
		err = errors.Join(err, t.rd.Close(), t.l.Close())
	})
	return err
}

// finish drains the last events and reads the counters; the programs stay
// attached (to a sealed, empty lineage) until Close detaches them, which
// patches the kernel's text on every CPU and so waits for the release.
func (t *bpfTracker) finish() error {
	t.finished.Do(func() {
		close(t.stop)
		<-t.done
		t.Counters() // the last reading, kept for Counters after Close
	})
	return nil
}

// startReading lets read begin its drains.
func (t *bpfTracker) startReading() { t.started.Do(func() { close(t.begin) }) }

// readInterval is how long an event waits in the ring buffer, at most,
// while the lineage is busy; a drain that finds nothing doubles the wait,
// up to idleInterval, so that a payload that only computes costs its hold
// a few wake-ups a second. Each drain costs the hold's runtime about ten
// context switches whatever it carries: at 20 ms a spawn-heavy payload's
// hold used twice the CPU it uses at 100 ms (measured: 47 vs 27 ms over
// 2,300 spawns). The wait bounds nothing but the record's lag: teardown
// reads the lineage map itself, and the programs wake the reader at once
// when a burst fills half the buffer (4 MiB: seconds of the fastest
// spawner this host runs).
const (
	readInterval = 100 * time.Millisecond
	idleInterval = 400 * time.Millisecond
)

// read drains the ring buffer at startReading, then on its interval and
// on the programs' wake-ups, and once more at Close.
func (t *bpfTracker) read() {
	defer close(t.done)
	select {
	case <-t.begin:
	case <-t.stop:
		t.drain()
		return
	}
	if _, ok := t.drain(); !ok { // what a pinned lineage holds already
		return
	}
	wait := readInterval
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
		case <-t.rd.Woken(): // a burst filled half the buffer
			timer.Stop()
		case <-t.stop:
			t.drain()
			return
		}
		n, ok := t.drain()
		if !ok {
			return
		}
		if n > 0 {
			wait = readInterval
		} else {
			wait = min(2*wait, idleInterval)
		}
		timer.Reset(wait)
	}
}

// drain turns the events in the ring buffer into lineage events and
// returns how many there were; ok is false once the reader is closed.
func (t *bpfTracker) drain() (n int, ok bool) {
	t.drains.Add(1)
	bad, err := t.rd.Drain(func(e bpf.Event) { n++; t.handle(e) })
	if n > 0 && t.opts.Flush != nil {
		t.opts.Flush()
	}
	if bad > 0 {
		t.mu.Lock()
		t.bad += uint64(bad) // undecodable records: reported as lost events
		t.mu.Unlock()
	}
	return n, err == nil
}

// handle turns one kernel event into a lineage event.
func (t *bpfTracker) handle(e bpf.Event) {
	ev := t.event(e)
	switch e.Kind {
	case bpf.KindFork, bpf.KindKilledAtBirth:
		// The payload leaves the hold's group on purpose (Setpgid):
		// its baseline is taken at its exec instead.
		if e.Flags&bpf.MemberRoot == 0 {
			t.mu.Lock()
			t.groups[ev.PID] = group{start: ev.Start, pgid: ev.PGID, sid: ev.SID}
			t.mu.Unlock()
		}
	case bpf.KindExec:
		t.regroup(ev.Time, ev.Ident, 0, ev.PGID, ev.SID)
	case bpf.KindExit:
		t.regroup(ev.Time, ev.Ident, 0, ev.PGID, ev.SID)
		t.mu.Lock()
		delete(t.groups, ev.PID)
		t.mu.Unlock()
	}
	t.emit(ev)
	if e.Kind != bpf.KindExec {
		select {
		case t.changed <- struct{}{}:
		default:
		}
	}
}

// event converts a kernel event.
func (t *bpfTracker) event(e bpf.Event) record.Event {
	uid := e.UID
	ev := record.Event{
		Time:  time.Unix(0, int64(e.TimeNs)+int64(t.bootToWall)),
		Ident: proc.Ident{PID: e.PID, Start: bpf.NsToTicks(e.StartNs)},
		PGID:  e.PGID,
		SID:   e.SID,
		UID:   &uid,
	}
	switch e.Kind {
	case bpf.KindFork:
		ev.Kind, ev.PPID = record.Fork, e.PPID
	case bpf.KindKilledAtBirth:
		ev.Kind, ev.PPID = record.KilledAtBirth, e.PPID
	case bpf.KindExec:
		ev.Kind, ev.Filename, ev.Argv = record.Exec, e.Filename, e.Argv
	case bpf.KindExit:
		ev.Kind = record.Exit
		code, sig := e.ExitStatus()
		if sig != 0 {
			ev.Signal = &sig
		} else {
			ev.ExitCode = &code
		}
	}
	return ev
}

// regroup emits a Regroup event when a member is seen in another process
// group or session than it was last seen in (from its fork on; the payload
// from its exec on).
func (t *bpfTracker) regroup(at time.Time, id proc.Ident, ppid, pgid, sid int) {
	t.mu.Lock()
	g, ok := t.groups[id.PID]
	known := ok && g.start == id.Start
	changed := known && (g.pgid != pgid || g.sid != sid)
	t.groups[id.PID] = group{start: id.Start, pgid: pgid, sid: sid} // the first sighting is the baseline
	t.mu.Unlock()
	if changed {
		t.emit(record.Event{Kind: record.Regroup, Time: at, Ident: id, PPID: ppid, PGID: pgid, SID: sid})
	}
}

func (t *bpfTracker) emit(ev record.Event) {
	if t.opts.Sink == nil {
		return
	}
	t.sinkMu.Lock()
	defer t.sinkMu.Unlock()
	t.opts.Sink(ev)
}
