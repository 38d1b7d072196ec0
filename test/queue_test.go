// queue_test.go owns the queue's tests against the real binary: 24 holds
// contending at once (never two payloads inside, grants in ticket order, all
// complete, nothing left), the same with holders SIGKILLed mid-hold (the
// queue drains, each dead holder reported to its successor), the wait
// allowance, a ticket cancelled while waiting, two resources, and the
// `gpu-hold queue` output.
package test

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/proc"
	"github.com/gpu-hold/gpu-hold/queue"
)

// qCmd runs a gpu-hold subcommand in dir and returns its result.
func qCmd(t *testing.T, dir string, args ...string) result {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"--dir", dir, "--log-format", "json"}, args...)...)
	cmd.Env = append(os.Environ(), queueEnv(dir)...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	t0 := time.Now()
	err := cmd.Run()
	r := result{Stdout: out.String(), Stderr: errb.String(), Elapsed: time.Since(t0)}
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			r.Code = ee.ExitCode()
		} else {
			t.Fatalf("gpu-hold %v: %v", args, err)
		}
	}
	return r
}

// qStatus is `gpu-hold queue --json -r res`, as a queue.Status.
func qStatus(t *testing.T, dir, res string) queue.Status {
	t.Helper()
	r := qCmd(t, dir, "queue", "--json", "-r", res)
	var doc qDoc
	if r.Code != 0 || json.Unmarshal([]byte(r.Stdout), &doc) != nil || len(doc.Resources) != 1 {
		t.Fatalf("gpu-hold queue --json: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	v := doc.Resources[0]
	st := queue.Status{Resource: v.Resource, Skipped: v.Skipped}
	if v.Holding != nil {
		h := v.Holding.ticket()
		st.Holder = &h
	}
	for _, w := range v.Waiting {
		st.Waiters = append(st.Waiters, w.ticket())
	}
	for _, d := range v.Dead {
		st.Dead = append(st.Dead, d.ticket())
	}
	return st
}

// qDoc is the document `gpu-hold queue --json` prints.
type qDoc struct {
	Resources []struct {
		Resource string     `json:"resource"`
		Holding  *qTicketV  `json:"holding"`
		Waiting  []qTicketV `json:"waiting"`
		Dead     []qTicketV `json:"dead"`
		Skipped  []string   `json:"skipped"`
	} `json:"resources"`
}

type qTicketV struct {
	Resource string     `json:"resource"`
	Ticket   uint64     `json:"ticket"`
	State    string     `json:"state"`
	Label    string     `json:"label"`
	User     string     `json:"user"`
	UID      int        `json:"uid"`
	Host     string     `json:"host"`
	Process  proc.Ident `json:"process"`
	Cmd      []string   `json:"cmd"`
	Created  time.Time  `json:"created"`
	Granted  time.Time  `json:"granted"`
	MaxHold  string     `json:"max_hold"`
	UsedMS   *int64     `json:"used_ms"`
	LeftMS   *int64     `json:"left_ms"`
	WaitMS   int64      `json:"wait_ms"`
	HoldID   string     `json:"hold_id"`
	Record   string     `json:"record"`
}

func (v qTicketV) ticket() queue.Ticket {
	return queue.Ticket{Seq: v.Ticket, Resource: v.Resource, Label: v.Label, Holder: v.Process, UID: v.UID, Host: v.Host,
		Cmd: v.Cmd, Created: v.Created, Granted: v.Granted, HoldID: v.HoldID, Record: v.Record}
}

// qWaitFor polls the queue until ok holds (a bound for "did not hang").
func qWaitFor(t *testing.T, dir, res, what string, ok func(queue.Status) bool) queue.Status {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st := qStatus(t, dir, res)
		if ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue never showed %s: %+v", what, st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func qHeldBy(label string) func(queue.Status) bool {
	return func(st queue.Status) bool { return st.Holder != nil && st.Holder.Label == label }
}

// qLogs decodes the JSON log lines a hold wrote to stderr.
func qLogs(stderr string) []map[string]any {
	var out []map[string]any
	for _, l := range strings.Split(stderr, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// qLogTickets returns the "ticket" field of every log line whose message
// starts with msg.
func qLogTickets(stderr, msg string) []uint64 {
	var out []uint64
	for _, m := range qLogs(stderr) {
		if s, _ := m["message"].(string); strings.HasPrefix(s, msg) {
			if v, ok := m["ticket"].(float64); ok {
				out = append(out, uint64(v))
			}
		}
	}
	return out
}

// qTicket is the ticket a hold took ("waiting for the token" or "token taken").
func qTicket(t *testing.T, h *hold) uint64 {
	t.Helper()
	for _, msg := range []string{"token taken", "waiting for the token"} {
		if s := qLogTickets(h.Stderr(), msg); len(s) > 0 {
			return s[0]
		}
	}
	t.Fatalf("hold %v logged no ticket:\n%s", h.Args, h.Stderr())
	return 0
}

// qSpan is one payload's time inside, from the shared log.
type qSpan struct {
	label        string
	enter, leave int64 // ns; leave 0: never left
}

// qReadLog parses "enter|leave LABEL NS" lines.
func qReadLog(t *testing.T, path string) (spans map[string]*qSpan, order []string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("payload log: %v", err)
	}
	spans = map[string]*qSpan{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(l)
		if len(f) != 3 {
			t.Fatalf("bad log line %q", l)
		}
		ns, _ := strconv.ParseInt(f[2], 10, 64)
		s := spans[f[1]]
		if s == nil {
			s = &qSpan{label: f[1]}
			spans[f[1]] = s
		}
		switch f[0] {
		case "enter":
			if s.enter != 0 {
				t.Fatalf("%s entered twice", f[1])
			}
			s.enter = ns
		case "leave":
			s.leave = ns
		}
	}
	for _, s := range spans {
		order = append(order, s.label)
	}
	sort.Slice(order, func(i, j int) bool { return spans[order[i]].enter < spans[order[j]].enter })
	return spans, order
}

// qPayload is a bash payload that logs its enter and leave instants. With
// a go file, it stays inside until that file exists (at most 10s).
func qPayload(log, label, gofile string) []string {
	wait := "sleep 0.05"
	if gofile != "" {
		wait = fmt.Sprintf(`for i in $(seq 1000); do [ -e %q ] && break; sleep 0.01; done`, gofile)
	}
	return sh(fmt.Sprintf(`echo "enter %[2]s $(date +%%s%%N)" >> %[1]q; %[3]s; echo "leave %[2]s $(date +%%s%%N)" >> %[1]q`, log, label, wait))
}

// qEntered lists the labels in the log's enter lines, in order.
func qEntered(log string) []string {
	b, _ := os.ReadFile(log)
	var entered []string
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "enter" {
			entered = append(entered, f[1])
		}
	}
	return entered
}

// qStress runs n holds at once; with kill, it SIGKILLs the gpu-hold of the
// payloads that are kill-th to enter, while they are inside, and checks
// everything the stress test promises.
func qStress(t *testing.T, dir string, n int, kill map[int]bool) { qStressHosts(t, dir, n, kill, 1) }

// qStressHosts is qStress with holds spread over hosts simulated hosts
// (GPU_HOLD_HOSTNAME). With more than one, a killed holder's payload is
// ended by the next hold on its own host, not by its successor: it is not
// counted as inside (a lease does not fence a dead holder's host), stays
// until it is ended, and must be ended by that one hold; a kill due when no
// ticket of the holder's host waits moves to the next hold to enter (none
// would ever end that payload: the product leaves it to its own host).
func qStressHosts(t *testing.T, dir string, n int, kill map[int]bool, hosts int) {
	scratch := t.TempDir()
	log := filepath.Join(scratch, "inside.log")
	mark := newMark(t)
	holds := map[string]*hold{}
	var labels []string
	for i := range n {
		label := fmt.Sprintf("s%02d", i)
		gofile := ""
		if len(kill) > 0 {
			gofile = filepath.Join(scratch, "go."+label)
		}
		h := newHold(t, dir, mark, append([]string{"-l", label, "--track", "proc", "-g", "2s", "--"}, qPayload(log, label, gofile)...)...)
		if hosts > 1 {
			h.Env = append(h.Env, "GPU_HOLD_HOSTNAME="+qHost(i, hosts))
		}
		holds[label] = h
		labels = append(labels, label)
	}
	for _, l := range labels { // as close to "at once" as a loop gets
		holds[l].Start()
	}
	killed := map[string]bool{}
	kill = maps.Clone(kill)
	if len(kill) > 0 {
		// Drive the payloads: each stays inside until its go file exists.
		// The k-th to enter has its hold SIGKILLed while inside; its go
		// file appears only once its successor entered, so a payload left
		// running (not reaped) would log its leave after that.
		free := func(l string) { os.WriteFile(filepath.Join(scratch, "go."+l), nil, 0o644) }
		deadline := time.Now().Add(90 * time.Second)
		for seen := 0; seen < n; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("only %d of %d payloads entered", seen, n)
			}
			entered := qEntered(log)
			for ; seen < len(entered); seen++ {
				l := entered[seen]
				if seen > 0 && killed[entered[seen-1]] && hosts == 1 {
					free(entered[seen-1])
				}
				switch {
				case kill[seen] && hosts > 1 && !qWaiterOn(t, dir, qHostOf(holds[l])):
					// No later hold on its host would end its payload:
					// kill the next one to enter instead.
					kill[seen+1] = true
					free(l)
				case kill[seen]:
					holds[l].Signal(syscall.SIGKILL)
					killed[l] = true
				default:
					free(l)
				}
			}
		}
	}
	seqOf := map[string]uint64{}
	for _, l := range labels {
		r := holds[l].Wait(120 * time.Second)
		seqOf[l] = qTicket(t, holds[l])
		if killed[l] {
			if r.Code != 128+int(syscall.SIGKILL) {
				t.Errorf("killed hold %s exited %d", l, r.Code)
			}
			continue
		}
		if r.Code != 0 {
			t.Errorf("hold %s exited %d:\n%s", l, r.Code, r.Stderr)
		}
	}

	spans, order := qReadLog(t, log)
	if len(order) != n {
		t.Fatalf("%d payloads ran, want %d", len(order), n)
	}
	// Never two inside: each payload left (or was ended) before the next entered.
	for i, l := range order {
		s := spans[l]
		if killed[l] {
			if s.leave != 0 {
				t.Errorf("payload of killed hold %s was left running: it logged its leave", l)
				// What the successor had to go on:
				recs, _ := filepath.Glob(filepath.Join(dir, "gpu", "records", "*"))
				for _, r := range recs {
					if b, _ := os.ReadFile(r); strings.Contains(string(b), `"label":"`+l+`"`) {
						t.Logf("record of %s:\n%s", l, b)
					}
				}
			}
			continue
		}
		if s.leave == 0 {
			t.Errorf("payload %s never left", l)
			continue
		}
		if i+1 < len(order) && spans[order[i+1]].enter < s.leave {
			t.Errorf("%s entered at %d while %s was inside (until %d)", order[i+1], spans[order[i+1]].enter, l, s.leave)
		}
	}
	// Granted in ticket order.
	for i := 1; i < len(order); i++ {
		if seqOf[order[i]] <= seqOf[order[i-1]] {
			t.Errorf("ran in order %v, tickets %v: not ticket order", order, seqOf)
			break
		}
	}
	// Each dead holder was reported to (exactly) one successor.
	for l := range killed {
		reporters := 0
		for _, o := range labels {
			for _, s := range qLogTickets(holds[o].Stderr(), "dead holder") {
				if s == seqOf[l] {
					reporters++
					if qHostOf(holds[o]) != qHostOf(holds[l]) {
						t.Errorf("dead holder %s (host %q) reaped by %s on host %q", l, qHostOf(holds[l]), o, qHostOf(holds[o]))
					}
					break
				}
			}
		}
		if reporters != 1 {
			t.Errorf("dead holder %s (ticket %d) reported by %d successors, want 1", l, seqOf[l], reporters)
		}
	}
	st := qStatus(t, dir, "gpu")
	if st.Holder != nil || len(st.Waiters) != 0 || len(st.Dead) != 0 {
		t.Errorf("queue not empty after the stress: %+v", st)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "gpu", "t.*")); len(left) != 0 {
		t.Errorf("tickets left behind: %v", left)
	}
	if pids := waitUnmarked(mark, 5*time.Second); len(pids) != 0 {
		t.Errorf("processes left running: %v", pids)
	}
}

// qWaiterOn reports whether a ticket of host waits in dir's queue: granted
// after the holder, it is bound to end a dead holder's lineage there.
func qWaiterOn(t *testing.T, dir, host string) bool {
	t.Helper()
	for _, w := range qStatus(t, dir, "gpu").Waiters {
		if w.Host == host {
			return true
		}
	}
	return false
}

func TestQueueStress24(t *testing.T) {
	forQueues(t, func(t *testing.T, dir string) { qStress(t, dir, 24, nil) })
}

func TestQueueStressKilledHolders(t *testing.T) {
	forQueues(t, func(t *testing.T, dir string) { qStress(t, dir, 24, map[int]bool{3: true, 9: true, 15: true}) })
}

func TestQueueWaitAllowance(t *testing.T) { forQueues(t, queueWaitAllowance) }

func queueWaitAllowance(t *testing.T, dir string) {
	mark := newMark(t)
	a := newHold(t, dir, mark, "-l", "alpha", "--track", "proc", "--", "sleep", "30").Start()
	qWaitFor(t, dir, "gpu", "alpha holding", qHeldBy("alpha"))
	ran := filepath.Join(t.TempDir(), "ran")
	b := newHold(t, dir, mark, append([]string{"-l", "beta", "-w", "300ms", "--track", "proc", "--"}, sh("touch "+ran)...)...)
	r := b.Run(30 * time.Second)
	if r.Code != 75 {
		t.Fatalf("wait allowance ran out: exit %d, want 75\n%s", r.Code, r.Stderr)
	}
	if !strings.Contains(r.Stderr, "alpha") {
		t.Errorf("message does not name the holder:\n%s", r.Stderr)
	}
	if !strings.Contains(r.Stderr, "the wait allowance of 300ms ran out") {
		t.Errorf("message does not give the allowance rounded, as -w said it:\n%s", r.Stderr)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("the payload ran although the wait ran out")
	}
	if st := qStatus(t, dir, "gpu"); len(st.Waiters) != 0 {
		t.Errorf("ticket left after the allowance: %+v", st.Waiters)
	}
	a.Signal(syscall.SIGTERM)
	a.Wait(30 * time.Second)
}

func TestQueueCancelWhileWaiting(t *testing.T) { forQueues(t, queueCancelWhileWaiting) }

func queueCancelWhileWaiting(t *testing.T, dir string) {
	mark := newMark(t)
	a := newHold(t, dir, mark, "-l", "alpha", "--track", "proc", "--", "sleep", "30").Start()
	qWaitFor(t, dir, "gpu", "alpha holding", qHeldBy("alpha"))
	ran := filepath.Join(t.TempDir(), "ran")
	b := newHold(t, dir, mark, append([]string{"-l", "beta", "--track", "proc", "--"}, sh("touch "+ran)...)...).Start()
	st := qWaitFor(t, dir, "gpu", "beta waiting", func(st queue.Status) bool { return len(st.Waiters) == 1 })
	seq := st.Waiters[0].Seq

	if r := qCmd(t, dir, "cancel", "banana"); r.Code != 125 || !strings.Contains(r.Stderr, "ticket number") {
		t.Errorf("cancel banana: exit %d\n%s", r.Code, r.Stderr)
	}
	// (cancel of the holder ends its hold: TestCancelRunningHoldAndWait.)
	if r := qCmd(t, dir, "cancel", "999999"); r.Code != 125 || !strings.Contains(r.Stderr, "gpu-hold queue") {
		t.Errorf("cancel of no ticket: exit %d\n%s", r.Code, r.Stderr)
	}
	t0 := time.Now()
	if r := qCmd(t, dir, "cancel", strconv.FormatUint(seq, 10)); r.Code != 0 {
		t.Fatalf("cancel %d: exit %d\n%s", seq, r.Code, r.Stderr)
	}
	r := b.Wait(30 * time.Second)
	noticed := time.Since(t0)
	if r.Code != 75 {
		t.Fatalf("cancelled hold exited %d, want 75\n%s", r.Code, r.Stderr)
	}
	t.Logf("cancelled hold exited %v after the cancel", noticed)
	if noticed > 2*time.Second {
		t.Errorf("cancel noticed after %v: it must be noticed at once", noticed)
	}
	if !strings.Contains(r.Stderr, "removed") {
		t.Errorf("message does not say the ticket was removed:\n%s", r.Stderr)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("the payload of a cancelled ticket ran")
	}
	a.Signal(syscall.SIGTERM)
	a.Wait(30 * time.Second)
}

func TestQueueTwoResources(t *testing.T) {
	dir := t.TempDir()
	mark := newMark(t)
	a := newHold(t, dir, mark, "-l", "gpu-job", "--track", "proc", "--", "sleep", "30").Start()
	qWaitFor(t, dir, "gpu", "gpu-job holding", qHeldBy("gpu-job"))
	r := newHold(t, dir, mark, "-r", "npu", "-l", "npu-job", "-w", "10s", "--track", "proc", "--", "true").Run(30 * time.Second)
	if r.Code != 0 {
		t.Errorf("npu hold blocked by gpu's holder: exit %d\n%s", r.Code, r.Stderr)
	}
	a.Signal(syscall.SIGTERM)
	a.Wait(30 * time.Second)
}

func TestQueueCommand(t *testing.T) {
	dir := t.TempDir()
	mark := newMark(t)
	if r := qCmd(t, dir, "queue"); r.Code != 0 || !strings.Contains(r.Stdout, "free") {
		t.Errorf("empty queue: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	a := newHold(t, dir, mark, "-l", "alpha", "--track", "proc", "--", "sleep", "30").Start()
	qWaitFor(t, dir, "gpu", "alpha holding", qHeldBy("alpha"))
	b := newHold(t, dir, mark, "-l", "beta", "--track", "proc", "--", "sleep", "7").Start()
	st := qWaitFor(t, dir, "gpu", "beta waiting", func(st queue.Status) bool { return len(st.Waiters) == 1 })
	if w := st.Waiters[0]; w.Label != "beta" || w.Holder.PID != b.Cmd.Process.Pid || w.UID != os.Getuid() ||
		strings.Join(w.Cmd, " ") != "sleep 7" || st.Holder.Holder.PID != a.Cmd.Process.Pid || st.Holder.Granted.IsZero() {
		t.Errorf("queue --json: %+v", st)
	}
	r := qCmd(t, dir, "queue")
	me := strconv.Itoa(os.Getuid())
	if u, err := user.Current(); err == nil {
		me = u.Username
	}
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	if r.Code != 0 || len(lines) != 3 {
		t.Fatalf("gpu-hold queue: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	for i, want := range [][]string{
		{"RESOURCE", "POS", "TICKET", "LABEL", "USER", "HOST", "PID", "TIME", "LEFT", "WAIT", "HOLD_ID", "COMMAND"},
		{"0", "holding", "alpha", strconv.Itoa(a.Cmd.Process.Pid), me, "sleep 30"},
		{"1", "waiting", "beta", strconv.Itoa(b.Cmd.Process.Pid), me, "sleep 7"},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i], w) {
				t.Errorf("line %d %q lacks %q", i, lines[i], w)
			}
		}
	}
	a.Signal(syscall.SIGTERM)
	a.Wait(30 * time.Second)
	b.Signal(syscall.SIGTERM)
	b.Wait(30 * time.Second)
}
