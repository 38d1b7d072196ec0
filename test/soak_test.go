// soak_test.go owns the soak (issue 48): three uids hold a pool and two
// single resources at once for $GPU_HOLD_SOAK (a duration), with holders
// and payloads SIGKILLed at random, one resource's records on a small file
// system that fills up, and the CPU saturated. Then: never two payloads on
// one device, no process of any payload left, every hold that ran has its
// record or a logged reason why not (a hold that cannot write one does not
// run, and says so), and the queues empty.
package test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	marks "github.com/gpu-hold/gpu-hold/internal/mark"
	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/internal/testenv"
)

// soakEnv is how long the soak runs (a Go duration); .ci/run sets it.
// Unset, the soak is skipped: it is minutes long.
const soakEnv = "GPU_HOLD_SOAK"

// soakPool is the size of the soak's pool; soakSingles its single resources.
const soakPool = 3

var soakSingles = []string{"s1", "s2"}

// soakFull is the single resource whose records live on a small file system.
const soakFull = "s2"

func TestSoak(t *testing.T) {
	d, err := time.ParseDuration(os.Getenv(soakEnv))
	if err != nil || d <= 0 {
		t.Skipf("the soak runs only when %s is a duration (.ci/run sets it): it takes minutes", soakEnv)
	}
	s := newSoak(t)
	s.saturateCPU()
	stop := s.reapLikeTheTimer()
	s.drive(d)
	stop()
	s.freeRecords()
	s.sweep()
	s.check()
}

// soak is one soak's set-up and what it saw.
type soak struct {
	t        *testing.T
	f        *fleet
	mark     string // on every payload's processes
	log      string // the payloads' enter/tick/leave lines
	rigs     []rig
	mu       sync.Mutex
	runs     []*soakRun
	fsFilled bool
	recs     string // soakFull's records directory, a small tmpfs
}

// soakRun is one hold of the soak: what it asked, how it was treated, how
// it ended.
type soakRun struct {
	label, res string
	n          int
	killHold   bool
	killLoad   bool
	res0       result
}

func newSoak(t *testing.T) *soak {
	f := newFleet(t, soakBackend(t))
	s := &soak{t: t, f: f, mark: newMark(t), log: filepath.Join(f.Scratch, "inside.log")}
	if err := os.WriteFile(s.log, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	os.Chmod(s.log, 0o666) // umask must not keep the users out
	s.declare()
	s.smallRecords()
	s.rigs = []rig{f.Root, f.A, f.B}
	return s
}

// soakBackend alternates nothing: root holds use eBPF where it loads, the
// users fall back to procfs, so both backends soak at once.
func soakBackend(t *testing.T) string {
	for _, be := range backends(t) {
		if be == "bpf" {
			return be
		}
	}
	return "proc"
}

// declare writes resources.json as the admin: a pool of plain-file devices
// and the single resources, none with device nodes to check.
func (s *soak) declare() {
	devdir := openDir(s.t)
	var devs []string
	for i := range soakPool {
		p := filepath.Join(devdir, fmt.Sprintf("dev%d", i))
		if err := os.WriteFile(p, nil, 0o666); err != nil {
			s.t.Fatal(err)
		}
		devs = append(devs, fmt.Sprintf(`{"nodes": [%q]}`, p))
	}
	cfg := fmt.Sprintf(`{"gpu": {"devices": [], "pool": {"devices": [%s]}}`, strings.Join(devs, ", "))
	for _, r := range soakSingles {
		cfg += fmt.Sprintf(`, %q: {"devices": []}`, r)
	}
	if err := os.WriteFile(filepath.Join(s.f.Dir, "resources.json"), []byte(cfg+"}"), 0o644); err != nil {
		s.t.Fatal(err)
	}
	// The admin makes the queues' directories and their records/ too: one
	// a user's hold made would be that user's to forge in, and other users'
	// holds would not queue (or keep their records) there.
	for _, r := range soakSingles {
		if r != soakFull {
			adminDir(s.t, adminDir(s.t, s.f.Dir, r), "records")
		}
	}
	adminDir(s.t, adminDir(s.t, s.f.Dir, "gpu"), "records")
	for i := range soakPool {
		adminDir(s.t, s.f.Dir, fmt.Sprintf("gpu.d%d", i))
	}
}

// smallRecords mounts a small tmpfs where soakFull's records go, made as
// an admin makes the fleet's directories, so that records fill it.
func (s *soak) smallRecords() {
	res := adminDir(s.t, s.f.Dir, soakFull)
	recs := adminDir(s.t, res, "records")
	opts := fmt.Sprintf("size=48k,mode=3775,uid=0,gid=%d", fleetGID)
	if err := syscall.Mount("gpu-hold-soak", recs, "tmpfs", 0, opts); err != nil {
		testenv.Need(s.t, "mounting a small tmpfs for the records: %v", err)
	}
	s.t.Cleanup(func() { syscall.Unmount(recs, syscall.MNT_DETACH) })
	s.recs = recs
}

// freeRecords is the admin's mend of the full disk: the records' file
// system grows, so that the sweep's holds can write theirs.
func (s *soak) freeRecords() {
	if err := syscall.Mount("gpu-hold-soak", s.recs, "tmpfs", syscall.MS_REMOUNT, "size=16m"); err != nil {
		s.t.Fatalf("growing the records' tmpfs: %v", err)
	}
}

// saturateCPU runs two busy loops per CPU until the test ends.
func (s *soak) saturateCPU() {
	hog := newMark(s.t)
	for range 2 * runtime.NumCPU() {
		c := exec.Command("bash", "-c", "while :; do :; done")
		c.Env = append(os.Environ(), markEnv+"="+hog)
		if err := c.Start(); err != nil {
			s.t.Fatal(err)
		}
		go c.Wait()
	}
}

// reapLikeTheTimer runs `gpu-hold reap --all` as root every 5 s, as the
// fleet's reap timer does (dist/systemd): a user's successor may not end
// another user's dead holder and waits for it. It returns its stop.
func (s *soak) reapLikeTheTimer() func() {
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-done:
				return
			case <-time.After(5 * time.Second):
			}
			c := exec.Command(bin, "--dir", s.f.Dir, "--log-format", "json", "reap", "--all")
			c.Env = append(os.Environ(), markEnv+"="+s.mark)
			if out, err := c.CombinedOutput(); err != nil {
				s.t.Logf("reap --all: %v\n%s", err, out)
			}
		}
	}()
	return func() { close(done); <-stopped }
}

// drive runs two submitters per uid until d has passed, each queueing one
// hold after another.
func (s *soak) drive(d time.Duration) {
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for i := range 2 * len(s.rigs) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))
			for n := 0; time.Now().Before(deadline); n++ {
				s.one(s.rigs[i%len(s.rigs)], fmt.Sprintf("w%d-%d", i, n), rng)
			}
		}()
	}
	wg.Wait()
}

// one runs one hold: a resource and count drawn at random, a payload that
// leaves a setsid'd TERM-ignoring child behind, and one time in five its
// holder, or else one time in six its payload, SIGKILLed once it runs.
func (s *soak) one(rg rig, label string, rng *rand.Rand) {
	r := &soakRun{label: label, res: "gpu", n: 1 + rng.IntN(soakPool)}
	if k := rng.IntN(4); k > 0 {
		r.res, r.n = soakSingles[(k-1)%len(soakSingles)], 0
	}
	r.killHold = rng.IntN(5) == 0
	r.killLoad = !r.killHold && rng.IntN(6) == 0
	args := []string{"-l", label, "-r", r.res, "-g", "1s", "--survivor-wait", "5s", "-t", "60s"}
	if r.n > 0 {
		args = append(args, "-n", strconv.Itoa(r.n))
	}
	stay := 200 + rng.IntN(1200)
	h := rg.start(s.t, s.f.Dir, s.mark, "", append(append(args, "--"), soakPayload(s.log, label, stay)...)...)
	if r.killHold || r.killLoad {
		s.killWhenInside(h, r)
	}
	r.res0 = h.Wait(10 * time.Minute)
	s.mu.Lock()
	s.runs = append(s.runs, r)
	s.mu.Unlock()
}

// soakPayload logs "enter LABEL US KEYS HOLD-ID PID", ticks every 50 ms
// for stay ms, then "leave LABEL US"; a setsid'd child that ignores TERM
// ticks on as LABEL+ until it is ended.
func soakPayload(log, label string, stay int) []string {
	return sh(fmt.Sprintf(`now() { echo "${EPOCHREALTIME/./}"; }
keys=${GPU_HOLD_DEVICES:+$(echo "$GPU_HOLD_DEVICES" | sed "s/[0-9][0-9]*/gpu:&/g")}
echo "enter %[2]s $(now) ${keys:-$GPU_HOLD_RESOURCE} $GPU_HOLD_ID $$" >> %[1]q
setsid bash -c 'trap "" TERM; while :; do echo "tick %[2]s+ ${EPOCHREALTIME/./}" >> %[1]q; sleep 0.05; done' &
for ((i = 0; i < %[3]d / 50; i++)); do echo "tick %[2]s $(now)" >> %[1]q; sleep 0.05; done
echo "leave %[2]s $(now)" >> %[1]q`, log, label, stay))
}

// killWhenInside SIGKILLs the hold, or its payload's root, once the
// payload has logged its enter line.
func (s *soak) killWhenInside(h *started, r *soakRun) {
	for deadline := time.Now().Add(slowed(5 * time.Minute)); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if h.Cmd.ProcessState != nil {
			return
		}
		e, ok := soakEnters(s.log)[r.label]
		if !ok {
			continue
		}
		if r.killHold {
			h.Cmd.Process.Signal(syscall.SIGKILL)
			return
		}
		if st, err := proc.ReadStat(e.pid); err == nil && marks.Carries(e.pid, s.mark) {
			proc.Signal(st.Ident, syscall.SIGKILL)
		}
		return
	}
}

// sweep queues, as root, one hold per resource that takes all of it: each
// ends what a killed holder left running before its own payload starts.
func (s *soak) sweep() {
	for _, res := range append([]string{"gpu"}, soakSingles...) {
		args := []string{"-l", "sweep-" + res, "-r", res}
		if res == "gpu" {
			args = append(args, "-n", strconv.Itoa(soakPool))
		}
		h := s.f.Root.start(s.t, s.f.Dir, s.mark, "", append(args, "--", "true")...)
		if r := h.Wait(5 * time.Minute); r.Code != 0 {
			s.t.Errorf("sweep of %s exited %d:\n%s", res, r.Code, r.Stderr)
		}
	}
}

// check asserts what must be true after the soak.
func (s *soak) check() {
	t := s.t
	spans := soakSpans(t, s.log)
	s.checkDevices(spans)
	s.checkEnds(spans)
	if pids := waitUnmarked(s.mark, slowed(10*time.Second)); len(pids) != 0 {
		t.Errorf("processes of the payloads left running after the sweep: %v", pids)
	}
	for _, res := range append([]string{"gpu"}, soakSingles...) {
		r := qCmd(t, s.f.Dir, "queue", "--json", "-r", res)
		if r.Code != 0 || strings.Contains(r.Stdout, `"seq"`) {
			t.Errorf("queue %s not empty after the soak (exit %d):\n%s%s", res, r.Code, r.Stdout, r.Stderr)
		}
	}
	if !s.fsFilled {
		t.Errorf("no hold of %s logged a full records file system: the soak did not reach that shape", soakFull)
	}
	t.Logf("%d holds, %d payloads entered", len(s.runs), len(spans))
}

// checkDevices: no device key was inside two payloads at once. A payload
// counts until its last tick, its setsid'd child's included: a killed
// holder's leftovers must be ended before anyone else gets its devices.
func (s *soak) checkDevices(spans map[string]*soakSpan) {
	byKey := map[string][]*soakSpan{}
	for _, sp := range spans {
		for _, k := range sp.keys {
			byKey[k] = append(byKey[k], sp)
		}
	}
	for k, sps := range byKey {
		for i, a := range sps {
			for _, b := range sps[i+1:] {
				if a.enter <= b.end && b.enter <= a.end {
					s.t.Errorf("%s: %s (%d..%d us) and %s (%d..%d us) were inside at once", k, a.label, a.enter, a.end, b.label, b.enter, b.end)
				}
			}
		}
	}
}

// checkEnds: each hold's exit fits how it was treated; each hold that ran
// has its record, or a logged reason why not; one that could not have a
// record on the full disk did not run (exit 125), saying why.
func (s *soak) checkEnds(spans map[string]*soakSpan) {
	for _, r := range s.runs {
		sp, ran := spans[r.label]
		want := map[int]bool{0: true}
		switch {
		case r.killHold:
			want = map[int]bool{137: true, 0: true} // 0: it ended before the kill
		case r.killLoad:
			want = map[int]bool{137: true, 0: true}
		}
		full := strings.Contains(r.res0.Stderr, "no space left")
		if full {
			s.fsFilled = true
			// A hold that cannot write its record does not run: without
			// it a successor could not find what a killed holder left.
			want[125] = !ran
		}
		if !want[r.res0.Code] {
			s.t.Errorf("hold %s (%s) exited %d:\n%s", r.label, r.res, r.res0.Code, r.res0.Stderr)
		}
		if !ran || r.killHold || r.res0.Code != 0 && r.res0.Code != 137 {
			continue
		}
		if !s.hasRecord(sp.holdID) && !strings.Contains(r.res0.Stderr, "record") {
			s.t.Errorf("hold %s (%s, id %s) ran, but has no record and logged no reason:\n%s", r.label, r.res, sp.holdID, r.res0.Stderr)
		}
	}
}

// hasRecord reports whether a record of hold id is anywhere in the fleet
// directory.
func (s *soak) hasRecord(id string) bool {
	found := false
	filepath.WalkDir(s.f.Dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasPrefix(d.Name(), strings.ReplaceAll(id, "/", "_")) && strings.HasSuffix(d.Name(), ".jsonl") {
			found = true
		}
		return nil
	})
	return found
}

// soakSpan is one payload's life from the log, in microseconds.
type soakSpan struct {
	label      string
	enter, end int64
	keys       []string
	holdID     string
	pid        int
}

// soakEnters reads the enter lines logged so far (a half-written log is
// no error yet).
func soakEnters(log string) map[string]*soakSpan {
	b, _ := os.ReadFile(log)
	out := map[string]*soakSpan{}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 6 && f[0] == "enter" {
			us, _ := strconv.ParseInt(f[2], 10, 64)
			pid, _ := strconv.Atoi(f[5])
			out[f[1]] = &soakSpan{label: f[1], enter: us, end: us, keys: strings.Split(f[3], ","), holdID: f[4], pid: pid}
		}
	}
	return out
}

// soakSpans reads the whole log: each payload's enter, and its end, the
// last line that it or its setsid'd child logged.
func soakSpans(t *testing.T, log string) map[string]*soakSpan {
	t.Helper()
	spans := soakEnters(log)
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 3 || f[0] == "enter" {
			continue
		}
		us, _ := strconv.ParseInt(f[2], 10, 64)
		if sp := spans[strings.TrimSuffix(f[1], "+")]; sp != nil {
			sp.end = max(sp.end, us)
		}
	}
	return spans
}
