// Package metrics holds --metrics-dir: one node_exporter textfile per resource,
// gpu_hold_<resource>.prom, with counters cumulative across holds. The
// counters live in a small JSON state file beside it (node_exporter reads
// only *.prom); each hold writes its own counts to a pending file, then
// adds every pending file to both under an flock (pending.go), and
// replaces each file atomically (temp file in the same dir, fsync, rename),
// so a scrape never sees half a file and no hold's counts are lost. The dir may be shared by several users' holds: files are
// group-writable, and never opened through a symlink or when special.
package metrics

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"golang.org/x/sys/unix"

	"github.com/gpu-hold/gpu-hold/internal/record"
	"github.com/gpu-hold/gpu-hold/internal/safefs"
)

// knownCauses are the values of the cause label that are always written
// (at 0, so rates work from the first hold): every cause of the table of
// outcomes (record.Outcomes). A hold may report others.
var knownCauses = func() []string {
	var cs []string
	for _, c := range record.Causes() {
		cs = append(cs, string(c))
	}
	return cs
}()

// causeUnknown counts a hold that gave no cause.
const causeUnknown = "unknown"

// Hold is what one hold adds to its resource's metrics.
type Hold struct {
	Granted       bool          // the hold got the token
	Cause         string        // why it ended (Result.Cause: a Cause* value); "" counts as "unknown"
	Wait          time.Duration // time in the queue
	Hold          time.Duration // time holding the token (0 when not granted)
	Survivors     int           // processes that could not be ended
	DeviceHolders int           // holders outside the baseline found after teardown
	LostEvents    uint64        // tracker events lost (ring buffer overflow, ...)
	End           time.Time     // when the hold ended; zero means now
}

// metricsState is the cumulative state of one resource, kept as JSON.
type metricsState struct {
	Version       int               `json:"version"`
	Holds         uint64            `json:"holds"`
	Granted       uint64            `json:"granted"`
	Exits         map[string]uint64 `json:"exits"`
	WaitSum       float64           `json:"wait_seconds_sum"`
	WaitCount     uint64            `json:"wait_seconds_count"`
	HoldSum       float64           `json:"hold_seconds_sum"`
	HoldCount     uint64            `json:"hold_seconds_count"`
	Survivors     uint64            `json:"survivors"`
	DeviceHolders uint64            `json:"device_holders"`
	LostEvents    uint64            `json:"lost_events"`
	LastHold      float64           `json:"last_hold_timestamp_seconds"`
	// Merged names the pending files added and not yet removed; Counted,
	// the last ones added, removed or not, so that a hold whose file
	// another merge added knows it was counted.
	Merged  []string `json:"merged,omitempty"`
	Counted []string `json:"counted,omitempty"`
}

// File returns the textfile path for resource in dir.
func File(dir, resource string) string {
	return filepath.Join(dir, "gpu_hold_"+fileSafe(resource)+".prom")
}

// fileSafe maps a resource name to the characters a file name here may use.
func fileSafe(s string) string {
	if s == "" {
		return "_"
	}
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			return r
		}
		return '_'
	}, s)
}

// metricsMode is every metrics file's mode, set exactly (the umask would
// keep the group out): the holds of every member of a shared metrics dir's
// group take the same lock and rewrite the same files.
const metricsMode = 0o664

// maxStateLen bounds what is read of a state file.
const maxStateLen = 1 << 20

// Record adds one hold to resource's metrics in dir and rewrites
// gpu_hold_<resource>.prom. The hold's counts go first to a pending file of
// its own, which needs no lock (pending.go); then, under an flock on a
// per-resource lock file, every pending file is added to the state and
// the .prom rewritten. Holds on other resources may record into the same
// dir at the same time. Every file is opened relative to dir's fd, never
// through a symlink and never when it is a FIFO or a device: such a file
// is an error that says what it is (the caller logs it and the hold goes
// on).
//
// The lock wait is bounded (mergeWait): any user who can read the lock
// file can hold it for ever. A hold that gives up loses nothing: the error
// says so, and the next hold that takes the lock adds its pending file. The
// hold records after its token is released, so the wait holds up no one's
// token.
func Record(dir, resource string, m Hold) error {
	if dir == "" {
		return nil
	}
	// Symlinks on the way are followed only when root's or ours.
	d, err := safefs.OpenUserDir(dir, 0)
	if err != nil {
		return fmt.Errorf("metrics dir %s: %v: create it or fix --metrics-dir", dir, err)
	}
	defer d.Close()
	base := ".gpu_hold_" + fileSafe(resource)
	pending, err := writePending(d, base, m)
	if err != nil {
		return err
	}
	unlock, err := lockMetrics(d, base, mergeWait)
	if err != nil {
		return &PendingError{File: d.Join(pending), Err: err}
	}
	defer unlock()
	return merge(d, base, resource, pending)
}

// PendingError says that a hold's counts are safe in their pending file
// but not yet in the .prom: the next hold that takes the lock adds them.
type PendingError struct {
	File string // the hold's pending file
	Err  error  // why they are not added yet
}

func (e *PendingError) Error() string {
	return fmt.Sprintf("%v; this hold's counts are kept in %s, and the next hold that takes the lock adds them", e.Err, e.File)
}

func (e *PendingError) Unwrap() error { return e.Err }

// Merge adds every pending file of resource in dir to its state and
// rewrites its .prom, as a Record does after writing its own.
func Merge(dir, resource string) error {
	d, err := safefs.OpenUserDir(dir, 0)
	if err != nil {
		return fmt.Errorf("metrics dir %s: %v: create it or fix --metrics-dir", dir, err)
	}
	defer d.Close()
	base := ".gpu_hold_" + fileSafe(resource)
	unlock, err := lockMetrics(d, base, mergeWait)
	if err != nil {
		return err
	}
	defer unlock()
	return merge(d, base, resource, "")
}

// merge is the read-modify-write under the lock: the pending files into
// the state, the state written, the files it now counts removed, the
// .prom rendered. own is the caller's pending file ("": none), which it
// is told of when it was not counted.
func merge(d *safefs.Dir, base, resource, own string) error {
	stateName := base + ".state.json"
	st, err := readMetricsState(d, stateName)
	if err != nil {
		return err
	}
	unread := errors.Join(mergePending(d, base, own, st), ownLost(d, st, own))
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	// The state first: if the .prom write then fails, the next hold
	// rewrites it from the state and nothing is counted twice or lost.
	if err := writeReplace(d, stateName, append(data, '\n')); err != nil {
		return err
	}
	removeMerged(d, st.Merged)
	prom, err := st.render(resource)
	if err != nil {
		return fmt.Errorf("encoding the metrics of %s: %v", resource, err)
	}
	if err := writeReplace(d, filepath.Base(File(d.Path(), resource)), prom); err != nil {
		return err
	}
	return unread
}

// ownLost says when the caller's pending file own was not counted: gone
// before the merge (anyone in a shared dir's group may remove or rename
// it), or left for a later one.
func ownLost(d *safefs.Dir, st *metricsState, own string) error {
	if own == "" || slices.Contains(st.Merged, own) || slices.Contains(st.Counted, own) {
		return nil
	}
	if _, err := d.Lstat(own); errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("this hold's pending metrics %s were removed or renamed before they were merged (by a member of the dir's group, or by hand): this hold is not counted", d.Join(own))
	}
	return fmt.Errorf("this hold's pending metrics %s are not counted yet: the next hold that merges adds them", d.Join(own))
}

// lockMetrics takes resource base's lock within wait; the returned func
// lets it go.
func lockMetrics(d *safefs.Dir, base string, wait time.Duration) (unlock func(), err error) {
	// Read-only is enough for flock, and opens a lock another uid made
	// before locks were group-writable.
	lock, _, _, err := d.OpenOrCreate(base+".lock", unix.O_RDONLY, metricsMode)
	if err != nil {
		return nil, fmt.Errorf("metrics lock: %v; the metrics are not written (make the dir writable for the group, or drop --metrics-dir)", err)
	}
	if err := flock(lock, wait); err != nil {
		lock.Close()
		return nil, fmt.Errorf("locking %s: %v", lock.Name(), err)
	}
	return func() {
		unix.Flock(int(lock.Fd()), unix.LOCK_UN)
		lock.Close()
	}, nil
}

// mergeWait bounds a Record's wait for the metrics lock. Its writers hold
// it for the time of a few small writes and fsyncs, which a loaded host
// can stretch to seconds; a stranger can hold it for ever, and a hold
// records after its release, so this bound only delays its exit. A
// variable for the tests.
var mergeWait = 10 * time.Second

// liveLockWait bounds the wait for the lock where the live gauges must be
// rewritten in place (a sticky dir), which happens before the release:
// a stranger holding the lock must not keep the token held.
const liveLockWait = 500 * time.Millisecond

// flock takes an exclusive lock within wait.
func flock(f *os.File, wait time.Duration) error {
	pause := time.Millisecond
	for deadline := time.Now().Add(wait); ; {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR):
			return err
		case time.Now().After(deadline):
			return fmt.Errorf("another process has held it for over %v (a hold writes under it for milliseconds): if this repeats, find its holder with `fuser %s`", wait, f.Name())
		}
		time.Sleep(pause)
		pause = min(2*pause, 50*time.Millisecond)
	}
}

// readMetricsState reads the state; a missing file is a fresh start, a
// corrupt one an error that says what to do.
func readMetricsState(d *safefs.Dir, name string) (*metricsState, error) {
	st := &metricsState{Version: 1, Exits: map[string]uint64{}}
	path := d.Join(name)
	data, _, err := d.ReadFile(name, maxStateLen)
	if errors.Is(err, unix.ENOENT) {
		return st, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading metrics state: %v", err)
	}
	if err := json.Unmarshal(data, st); err != nil {
		return nil, fmt.Errorf("metrics state %s is corrupt (%v): remove it (and its .prom) to start the counters afresh", path, err)
	}
	if st.Exits == nil {
		st.Exits = map[string]uint64{}
	}
	return st, nil
}

// add counts one hold. The counters saturate rather than wrap: a pending
// file is anyone's in the dir's group, and a count that wraps goes back.
func (st *metricsState) add(m Hold) {
	st.Holds = satAdd(st.Holds, 1)
	if m.Granted {
		st.Granted = satAdd(st.Granted, 1)
		st.HoldSum += m.Hold.Seconds()
		st.HoldCount = satAdd(st.HoldCount, 1)
	}
	cause := st.causeLabel(m.Cause)
	st.Exits[cause] = satAdd(st.Exits[cause], 1)
	st.WaitSum += m.Wait.Seconds()
	st.WaitCount = satAdd(st.WaitCount, 1)
	st.Survivors = satAdd(st.Survivors, uint64(max(m.Survivors, 0)))
	st.DeviceHolders = satAdd(st.DeviceHolders, uint64(max(m.DeviceHolders, 0)))
	st.LostEvents = satAdd(st.LostEvents, m.LostEvents)
	end := m.End
	if end.IsZero() {
		end = time.Now()
	}
	st.LastHold = float64(end.UnixNano()) / 1e9
}

// satAdd is a+b, or the largest count where that would wrap.
func satAdd(a, b uint64) uint64 {
	if a+b < a {
		return math.MaxUint64
	}
	return a + b
}

// maxCauses bounds the cause label's values, and maxCauseLen each value:
// every value is a series in the .prom and a key in the state, and a
// pending file's cause is anyone's text.
const (
	maxCauses   = 64
	maxCauseLen = 32
)

// causeLabel is the label value that counts cause: itself when it is a
// known cause, or a short word already counted or with room left for it;
// otherwise "unknown".
func (st *metricsState) causeLabel(cause string) string {
	if slices.Contains(knownCauses, cause) {
		return cause
	}
	if _, ok := st.Exits[cause]; ok && cause != "" {
		return cause
	}
	word := cause != "" && len(cause) <= maxCauseLen && strings.Trim(cause, "abcdefghijklmnopqrstuvwxyz0123456789-_") == ""
	if !word || len(st.Exits) >= maxCauses {
		return causeUnknown
	}
	return cause
}

// render is the state's metric families in the text exposition format.
func (st *metricsState) render(resource string) ([]byte, error) {
	res := []string{"resource", resource}
	counter := func(name, help string, v float64) *family {
		return newFamily(name, help, dto.MetricType_COUNTER).add(v, res...)
	}
	exits := newFamily("gpu_hold_exits_total", "Holds by the cause of their end.", dto.MetricType_COUNTER)
	causes := append([]string(nil), knownCauses...)
	for c := range st.Exits {
		if !slices.Contains(knownCauses, c) {
			causes = append(causes, c)
		}
	}
	sort.Strings(causes)
	for _, c := range causes {
		exits.add(float64(st.Exits[c]), "resource", resource, "cause", c)
	}
	return encode(
		counter("gpu_hold_holds_total", "Holds that ended, granted or not.", float64(st.Holds)),
		counter("gpu_hold_holds_granted_total", "Holds that were granted the token.", float64(st.Granted)),
		exits,
		newFamily("gpu_hold_wait_seconds", "Time spent waiting in the queue.", dto.MetricType_SUMMARY).addSummary(st.WaitSum, st.WaitCount, res...),
		newFamily("gpu_hold_hold_seconds", "Time granted holds held the token.", dto.MetricType_SUMMARY).addSummary(st.HoldSum, st.HoldCount, res...),
		counter("gpu_hold_survivors_total", "Processes that teardown could not end (recorded as survivors).", float64(st.Survivors)),
		counter("gpu_hold_device_holders_total", "Processes outside the baseline found holding the device after teardown.", float64(st.DeviceHolders)),
		counter("gpu_hold_lost_events_total", "Tracker events lost.", float64(st.LostEvents)),
		newFamily("gpu_hold_last_hold_timestamp_seconds", "Unix time the last hold ended.", dto.MetricType_GAUGE).add(st.LastHold, res...),
	)
}

// writeReplace replaces name in d with data: a temp file in the same
// directory (a name node_exporter ignores), fsync, rename over name, fsync
// of the directory, so readers see the old file or the new one, never a
// part. A name that is not a regular file (a planted symlink, FIFO,
// device) is reported and left alone.
//
// In a sticky dir (a world- or group-writable one set up with +t), rename
// cannot replace another uid's file: the kernel refuses it as it refuses
// removing it. Then the file, group-writable (metricsMode), is rewritten in
// place under the lock the caller holds, which the holds all take; a
// scrape may then catch it half-written once. The documented set-up of a
// shared metrics dir is setgid and group-writable without the sticky bit
// (install -d -m 2775 -g GROUP DIR), where every replace is atomic.
func writeReplace(d *safefs.Dir, name string, data []byte) error {
	replaced, err := replace(d, name, data)
	if err != nil || replaced {
		return err
	}
	return writeInPlace(d, name, data)
}

// replace is writeReplace's atomic part: false (and no error) when the
// kernel refuses the rename (a sticky dir, another uid's file), which
// leaves only a rewrite in place.
func replace(d *safefs.Dir, name string, data []byte) (bool, error) {
	if st, err := d.Lstat(name); err == nil && !st.IsRegular() {
		return false, fmt.Errorf("metrics file: %w", &safefs.NotRegularError{Info: st, Want: "a regular file"})
	}
	tmp, err := writeTemp(d, name, data)
	if err != nil {
		return false, err
	}
	err = d.Rename(tmp, name)
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		d.Remove(tmp, tmpInfo(d, tmp))
		return false, nil
	}
	if err != nil {
		d.Remove(tmp, tmpInfo(d, tmp))
		return false, fmt.Errorf("replacing %s: %v", d.Join(name), err)
	}
	unix.Fsync(d.Fd())
	return true, nil
}

// writeTemp writes data to a new temp file for name and returns its name.
func writeTemp(d *safefs.Dir, name string, data []byte) (string, error) {
	tmp := "." + name + ".tmp-" + randomHex()
	f, st, err := d.Create(tmp, unix.O_WRONLY, metricsMode)
	if err != nil {
		return "", fmt.Errorf("writing %s: %v", d.Join(name), err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		d.Remove(tmp, st)
		return "", fmt.Errorf("writing %s: %v", d.Join(tmp), err)
	}
	return tmp, nil
}

// writeInPlace rewrites name with data through one fd: a regular file with
// one link only (a hard link would write someone else's file too).
func writeInPlace(d *safefs.Dir, name string, data []byte) error {
	f, st, err := d.Open(name, unix.O_WRONLY)
	if err != nil {
		if errors.Is(err, os.ErrPermission) {
			return fmt.Errorf("%s belongs to uid %d (mode %04o) and this hold (uid %d) can neither replace it in the sticky dir nor write it: chmod 664 it, or set the dir up as documented (install -d -m 2775 -g GROUP %s, no sticky bit)",
				d.Join(name), st.UID, st.Perm(), os.Geteuid(), d.Path())
		}
		return fmt.Errorf("rewriting %s: %v", d.Join(name), err)
	}
	defer f.Close()
	_, err = f.WriteAt(data, 0)
	if err == nil {
		err = f.Truncate(int64(len(data)))
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		return fmt.Errorf("rewriting %s: %v", d.Join(name), err)
	}
	return nil
}

// randomHex is a name part no other writer picks.
func randomHex() string {
	var rnd [6]byte
	rand.Read(rnd[:])
	return hex.EncodeToString(rnd[:])
}

// tmpInfo is our temp file's Info, for removing it only while it is ours.
func tmpInfo(d *safefs.Dir, name string) safefs.Info {
	st, _ := d.Lstat(name)
	return st
}
