// bounded_test.go checks the teardown that reads the kernel's accounts
// instead of walking /proc: a member of the payload's group that is in
// neither the lineage nor a cgroup (it joined the group) still gets its
// TERM, through the group's pidfd, and acts on it while the grace waits on
// the lineage. (The grace does not wait on such an outsider: it is not in
// any account; the group's KILL at the end reaches it.)
package teardown

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	marks "github.com/gpu-hold/gpu-hold/internal/mark"
	"github.com/gpu-hold/gpu-hold/proc"
	"github.com/gpu-hold/gpu-hold/record"
)

// listedTracker's lineage is a fixed list of processes, named without a
// walk (tracker.Listed), with an account that agrees.
type listedTracker struct{ ids []proc.Ident }

func (f *listedTracker) Backend() string           { return "listed" }
func (f *listedTracker) Prepare(*exec.Cmd) error   { return nil }
func (f *listedTracker) Started(proc.Ident) error  { return nil }
func (f *listedTracker) Changed() <-chan struct{}  { return nil }
func (f *listedTracker) Seal() error               { return nil }
func (f *listedTracker) Counters() record.Counters { return record.Counters{} }
func (f *listedTracker) Close() error              { return nil }
func (f *listedTracker) Live() ([]proc.Stat, error) {
	var out []proc.Stat
	for _, id := range f.ids {
		if st, ok := proc.LiveStat(id); ok {
			out = append(out, st)
		}
	}
	return out, nil
}
func (f *listedTracker) LiveIn(*proc.Snapshot) []proc.Stat { live, _ := f.Live(); return live }
func (f *listedTracker) ListLive() ([]proc.Stat, bool)     { live, _ := f.Live(); return live, true }
func (f *listedTracker) Account() (some, known bool)       { live, _ := f.Live(); return len(live) > 0, true }

func TestBoundedTeardownTermsGroupOutsider(t *testing.T) {
	mark := marks.New()
	t.Cleanup(func() { marks.Kill(mark) })
	env := append(os.Environ(), marks.Env+"="+mark)
	// The payload outlives its TERM by a while: the grace lasts that long.
	dir := t.TempDir()
	payload := exec.Command("sh", "-c", `trap "" TERM; echo > `+dir+`/payload.ready; sleep 0.5`)
	payload.Env = env
	payload.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := payload.Start(); err != nil {
		t.Fatal(err)
	}
	go payload.Wait()
	root, err := proc.ReadStat(payload.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	// The outsider joins the payload's group; it is no member of the lineage.
	said := filepath.Join(dir, "said")
	outsider := exec.Command("sh", "-c", `trap 'echo term > `+said+`; exit 0' TERM; echo ready > `+said+`.ready; while :; do sleep 0.05; done`)
	outsider.Env = env
	outsider.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: root.PID}
	if err := outsider.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- outsider.Wait() }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		_, err1 := os.Stat(said + ".ready")
		_, err2 := os.Stat(filepath.Join(dir, "payload.ready"))
		if err1 == nil && err2 == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the payload or the outsider never set its TERM trap")
		}
	}

	td := &Teardown{Tracker: &listedTracker{ids: []proc.Ident{root.Ident}}, PGID: root.PID, Root: root.Ident,
		Grace: 10 * time.Second, SurvivorWait: 5 * time.Second, Log: zerolog.New(zerolog.NewTestWriter(t))}
	out := td.Run()
	if !td.bounded {
		t.Skip("the payload's group cannot be signalled through its leader's pidfd here (Linux < 6.9): the teardown walked /proc")
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the group's outsider is alive after the teardown")
	}
	if b, _ := os.ReadFile(said); !strings.Contains(string(b), "term") {
		t.Fatalf("the group's outsider was not sent TERM (it said %q; outcome %+v): it died of the KILL", b, out)
	}
	if len(out.Survivors) > 0 {
		t.Fatalf("survivors: %+v", out.Survivors)
	}
}
