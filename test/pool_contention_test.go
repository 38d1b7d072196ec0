// pool_contention_test.go runs 24 real holds asking for 1, 2 and 4 of a
// pool of 8 devices at once, some SIGKILLed while their payload runs, and
// checks from the payloads' own log (enter with their device set, ticks,
// leave, with timestamps) and the holds' logs: never a device in two
// payloads at once, never a partial hold, a killed holder's payload ended
// before anyone else used its devices, and the head never overtaken
// except by a backfill whose hold was released before the head's earliest
// start.
package test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/queue"
)

// pcSpan is one payload's life from the log, in microseconds.
type pcSpan struct {
	enter, end int64 // end: its leave, else its last tick
	left       bool
	devs       []int
}

// pcPayload logs "enter LABEL US DEVICES", then a tick every 50ms until
// its go file exists, then "leave LABEL US".
func pcPayload(log, label, gofile string) []string {
	return sh(fmt.Sprintf(`now() { echo "${EPOCHREALTIME/./}"; }
echo "enter %[2]s $(now) $GPU_HOLD_DEVICES" >> %[1]q
for ((i = 0; i < 2400; i++)); do [ -e %[3]q ] && break; echo "tick %[2]s $(now)" >> %[1]q; sleep 0.05; done
echo "leave %[2]s $(now)" >> %[1]q`, log, label, gofile))
}

func pcReadLog(t *testing.T, path string) (map[string]*pcSpan, []string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	spans := map[string]*pcSpan{}
	var order []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(l)
		if len(f) < 3 {
			t.Fatalf("bad log line %q", l)
		}
		us, _ := strconv.ParseInt(f[2], 10, 64)
		s := spans[f[1]]
		if s == nil {
			s = &pcSpan{}
			spans[f[1]] = s
		}
		switch f[0] {
		case "enter":
			if s.enter != 0 {
				t.Fatalf("%s entered twice", f[1])
			}
			s.enter, s.end = us, us
			order = append(order, f[1])
			if len(f) == 4 {
				for _, d := range strings.Split(f[3], ",") {
					n, _ := strconv.Atoi(d)
					s.devs = append(s.devs, n)
				}
			}
		case "tick":
			s.end = max(s.end, us)
		case "leave":
			s.end, s.left = us, true
		}
	}
	return spans, order
}

// pcGrant is what a hold logged when it took its devices.
type pcGrant struct {
	seq       uint64
	at        time.Time
	devices   []int
	backfill  bool
	head      uint64
	headStart time.Time
	along     []uint64
	released  time.Time
}

func pcGrantOf(t *testing.T, stderr string) pcGrant {
	t.Helper()
	var g pcGrant
	for _, l := range strings.Split(stderr, "\n") {
		var m struct {
			Msg       string    `json:"message"`
			Time      time.Time `json:"time"`
			Ticket    uint64    `json:"ticket"`
			Devices   []int     `json:"devices"`
			Backfill  bool      `json:"backfill"`
			Head      uint64    `json:"head"`
			HeadStart time.Time `json:"head_start"`
			Along     []uint64  `json:"along"`
			Decided   time.Time `json:"decided"`
		}
		if json.Unmarshal([]byte(l), &m) != nil {
			continue
		}
		switch {
		case m.Msg == "waiting for the token":
			g.seq = m.Ticket
		case strings.HasSuffix(m.Msg, "devices of gpu taken"):
			g.at, g.devices, g.backfill, g.head, g.headStart, g.along = m.Decided, m.Devices, m.Backfill, m.Head, m.HeadStart, m.Along
		case m.Msg == "token released":
			g.released = m.Time
		}
	}
	if g.seq == 0 || g.at.IsZero() {
		t.Fatalf("hold logged no ticket or grant:\n%s", stderr)
	}
	return g
}

func TestPoolContention24(t *testing.T) {
	dir := poolQueueDir(t, 8)
	scratch := t.TempDir()
	log := filepath.Join(scratch, "inside.log")
	mark := newMark(t)
	holds := map[string]*hold{}
	specs := map[string]pcSpec{}
	var labels []string
	for i := range 24 {
		label := fmt.Sprintf("p%02d", i)
		s := pcSpec{count: []int{1, 2, 4}[i%3], dur: time.Duration(150+100*(i%4)) * time.Millisecond}
		// Max holds make backfill possible; a 4-device hold in two has
		// none, so the head's earliest start is often unknown too.
		switch {
		case s.count == 1:
			s.args = []string{"-t", "5s"}
		case s.count == 2:
			s.args = []string{"-t", "40s"}
		case i%2 == 0:
			s.args = []string{"-t", "60s"}
		}
		args := append([]string{"-l", label, "-n", strconv.Itoa(s.count), "--track", "proc", "-g", "1s", "--survivor-wait", "1s"}, s.args...)
		h := newHold(t, dir, mark, append(append(args, "--"), pcPayload(log, label, filepath.Join(scratch, "go."+label))...)...)
		holds[label], specs[label] = h, s
		labels = append(labels, label)
	}
	for _, l := range labels {
		holds[l].Start()
	}
	// The 3rd, 9th and 15th payloads to enter have their gpu-hold SIGKILLed.
	kill := map[int]bool{2: true, 8: true, 14: true}
	killed := map[string]bool{}
	deadline := time.Now().Add(slowed(120 * time.Second))
	for seen := 0; seen < len(labels); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d payloads entered", seen, len(labels))
		}
		_, order := pcReadLogQuiet(log)
		for ; seen < len(order); seen++ {
			l := order[seen]
			if kill[seen] {
				holds[l].Signal(syscall.SIGKILL)
				killed[l] = true
				continue
			}
			gofile := filepath.Join(scratch, "go."+l)
			time.AfterFunc(specs[l].dur, func() { os.WriteFile(gofile, nil, 0o644) })
		}
	}
	grants := map[string]pcGrant{}
	for _, l := range labels {
		r := holds[l].Wait(slowed(120 * time.Second))
		if killed[l] {
			continue
		}
		if r.Code != 0 {
			t.Errorf("hold %s exited %d:\n%s", l, r.Code, r.Stderr)
		}
		grants[l] = pcGrantOf(t, r.Stderr)
	}
	// A last hold of all 8 devices reaps whatever a killed holder left.
	sweep := newHold(t, dir, mark, append([]string{"-l", "sweep", "-n", "8", "--track", "proc", "--"}, pcPayload(log, "sweep", filepath.Join(scratch, "go.sweep"))...)...)
	os.WriteFile(filepath.Join(scratch, "go.sweep"), nil, 0o644)
	if r := sweep.Run(slowed(60 * time.Second)); r.Code != 0 {
		t.Fatalf("sweep hold exited %d:\n%s", r.Code, r.Stderr)
	}
	spans, _ := pcReadLog(t, log)
	pcCheckDevices(t, spans, pcCounts(specs), killed)
	pcCheckOrder(t, grants, specs)
	st := poolStatus(t, dir)
	for _, d := range st.Devices {
		if d.Holder != nil || len(d.Dead) > 0 {
			t.Errorf("device %d still held or dead after the run: %+v", d.Index, d)
		}
	}
	if len(st.Running)+len(st.Waiters) != 0 {
		t.Errorf("pool tickets left: %+v", st)
	}
	if pids := waitUnmarked(mark, 5*time.Second); len(pids) != 0 {
		t.Errorf("processes left running: %v", pids)
	}
}

// pcSpec is one contending hold: devices asked, extra flags, time inside.
type pcSpec struct {
	count int
	args  []string
	dur   time.Duration
}

func pcCounts(m map[string]pcSpec) map[string]int {
	out := map[string]int{}
	for l, s := range m {
		out[l] = s.count
	}
	return out
}

// pcReadLogQuiet is pcReadLog for the driver loop: a missing or half
// written log is not an error yet.
func pcReadLogQuiet(path string) (map[string]bool, []string) {
	b, _ := os.ReadFile(path)
	seen := map[string]bool{}
	var order []string
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 3 && f[0] == "enter" && !seen[f[1]] {
			seen[f[1]] = true
			order = append(order, f[1])
		}
	}
	return seen, order
}

// pcCheckDevices: every payload had exactly its count of distinct devices,
// no device was in two payloads at once (a killed holder's payload counts
// until its last tick: its successor had to end it first), and killed
// holders' payloads were ended, never left to finish.
func pcCheckDevices(t *testing.T, spans map[string]*pcSpan, counts map[string]int, killed map[string]bool) {
	t.Helper()
	counts["sweep"] = 8
	byDev := map[int][]string{}
	for l, s := range spans {
		uniq := map[int]bool{}
		for _, d := range s.devs {
			if d < 0 || d >= 8 || uniq[d] {
				t.Errorf("%s got devices %v: not %d distinct devices of the pool", l, s.devs, counts[l])
			}
			uniq[d] = true
			byDev[d] = append(byDev[d], l)
		}
		if len(s.devs) != counts[l] {
			t.Errorf("%s got %d devices %v, asked %d: a partial hold", l, len(s.devs), s.devs, counts[l])
		}
		if killed[l] && s.left {
			t.Errorf("the payload of killed hold %s was left to finish: nobody ended it", l)
		}
	}
	for d, ls := range byDev {
		sort.Slice(ls, func(i, j int) bool { return spans[ls[i]].enter < spans[ls[j]].enter })
		for i := 1; i < len(ls); i++ {
			if prev, cur := spans[ls[i-1]], spans[ls[i]]; cur.enter <= prev.end {
				t.Errorf("device %d: %s entered at %d while %s was still inside (until %d)", d, ls[i], cur.enter, ls[i-1], prev.end)
			}
		}
	}
}

// pcBound is the bound a hold of spec s keeps its devices for at most
// (docs/OPERATING.md, Device pools): its max hold plus grace, survivor wait and 10s.
func pcBound(s pcSpec) time.Duration {
	if len(s.args) < 2 {
		return 0
	}
	d, _ := time.ParseDuration(s.args[1])
	return d + time.Second + time.Second + 10*time.Second
}

// pcCheckOrder: a hold granted before one with an earlier ticket either
// started along with it (it fitted too) or was a backfill whose bound, from
// its own flags, ends no later than the earliest start of the head it went
// before, and which was indeed released by then.
func pcCheckOrder(t *testing.T, grants map[string]pcGrant, specs map[string]pcSpec) {
	t.Helper()
	backfills := 0
	for lb, b := range grants {
		if b.backfill {
			backfills++
			bound := pcBound(specs[lb])
			switch {
			case bound == 0:
				t.Errorf("backfill %s (ticket %d) has no max hold: nothing proves it ends before head %d", lb, b.seq, b.head)
			case b.headStart.IsZero() || b.at.Add(bound).After(b.headStart):
				t.Errorf("backfill %s (ticket %d) started at %v with bound %v, past head %d's earliest start %v", lb, b.seq, b.at, bound, b.head, b.headStart)
			case b.released.After(b.headStart):
				t.Errorf("backfill %s (ticket %d) was released at %v, after head %d's earliest start %v", lb, b.seq, b.released, b.head, b.headStart)
			}
		}
		for la, a := range grants {
			if a.seq >= b.seq || !b.at.Before(a.at) {
				continue
			}
			along := false
			for _, s := range b.along {
				along = along || s == a.seq
			}
			if !along && !b.backfill {
				t.Errorf("%s (ticket %d) took its devices at %v, before %s (ticket %d, at %v), neither along with it nor as a backfill", lb, b.seq, b.at, la, a.seq, a.at)
			}
		}
	}
	t.Logf("%d of %d holds were backfills", backfills, len(grants))
}

// poolQueueDir is a queue dir whose resources.json gives gpu a pool of n
// devices (plain files: nothing filters them).
func poolQueueDir(t *testing.T, n int) string {
	t.Helper()
	devdir := t.TempDir()
	var devs []string
	for i := range n {
		p := filepath.Join(devdir, fmt.Sprintf("dev%d", i))
		if err := os.WriteFile(p, nil, 0o666); err != nil {
			t.Fatal(err)
		}
		devs = append(devs, fmt.Sprintf(`{"nodes": [%q]}`, p))
	}
	dir := t.TempDir()
	cfg := fmt.Sprintf(`{"gpu": {"devices": [], "pool": {"devices": [%s]}}}`, strings.Join(devs, ", "))
	if err := os.WriteFile(filepath.Join(dir, "resources.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// poolStatus is `gpu-hold queue --json` of the gpu pool.
func poolStatus(t *testing.T, dir string) queue.PoolStatus {
	t.Helper()
	r := qCmd(t, dir, "queue", "--json", "-r", "gpu")
	var st queue.PoolStatus
	if r.Code != 0 || json.Unmarshal([]byte(r.Stdout), &st) != nil {
		t.Fatalf("gpu-hold queue --json: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	return st
}
