// queue_test.go owns the tests of the read-only subcommands (queue, cancel)
// run through their xRun functions: they create nothing, and an unknown
// resource is one usage error that lists the known ones.
package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/gpu-hold/gpu-hold/hold"
	"github.com/gpu-hold/gpu-hold/internal/fleetenv"
)

func testGlobal(dir, res string) *globalOpts {
	return &globalOpts{Dir: dir, Resource: res, Log: zerolog.Nop()}
}

// entries lists dir's names.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// wantUnknown checks err is the one-line usage error for an unknown
// resource that lists the known ones.
func wantUnknown(t *testing.T, err error, res string, known ...string) {
	t.Helper()
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != hold.ExitUsage {
		t.Fatalf("got %v, want a usage error (exit %d)", err, hold.ExitUsage)
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") || !strings.Contains(msg, "unknown") || !strings.Contains(msg, res) {
		t.Errorf("error %q: want one line saying resource %s is unknown", msg, res)
	}
	for _, k := range known {
		if !strings.Contains(msg, k) {
			t.Errorf("error %q does not list known resource %s", msg, k)
		}
	}
}

func TestQueueUnknownResourceCreatesNothing(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "fpga"), 0o755) // a resource some hold used
	var out bytes.Buffer
	err := queueRun(&queueOptions{One: true, g: testGlobal(dir, "gpux"), Out: &out, Now: time.Now})
	wantUnknown(t, err, "gpux", "gpu", "npu", "fpga")
	if got := entries(t, dir); len(got) != 1 {
		t.Errorf("gpu-hold queue -r gpux left %q in the queue dir, want only fpga", got)
	}
	if strings.Contains(out.String(), "token free") {
		t.Errorf("an unknown resource reported as free: %q", out.String())
	}
}

func TestCancelUnknownResourceCreatesNothing(t *testing.T) {
	dir := t.TempDir()
	err := cancelRun(&cancelOptions{g: testGlobal(dir, "gpux"), Ticket: "3", UID: os.Getuid(), Out: &bytes.Buffer{}})
	wantUnknown(t, err, "gpux", "gpu", "npu")
	if got := entries(t, dir); len(got) != 0 {
		t.Errorf("gpu-hold cancel -r gpux left %q in the queue dir", got)
	}
}

// A configured resource nobody has queued for yet is free, and stays
// without a directory.
func TestQueueConfiguredResourceWithoutDir(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	if err := queueRun(&queueOptions{One: true, g: testGlobal(dir, "npu"), Out: &out, Now: time.Now}); err != nil {
		t.Fatalf("gpu-hold queue -r npu: %v", err)
	}
	if !strings.Contains(out.String(), "npu: token free") {
		t.Errorf("output %q, want npu: token free", out.String())
	}
	err := cancelRun(&cancelOptions{g: testGlobal(dir, "npu"), Ticket: "3", UID: os.Getuid(), Out: &bytes.Buffer{}})
	if err == nil || !strings.Contains(err.Error(), "no ticket 3") {
		t.Errorf("cancel in a resource without a dir: %v, want no ticket 3", err)
	}
	if got := entries(t, dir); len(got) != 0 {
		t.Errorf("queue/cancel -r npu left %q in the queue dir", got)
	}
}

// The per-user default queue dir is not created by a command that only
// reads.
func TestQueueCreatesNoStateDir(t *testing.T) {
	if _, err := os.Stat(fleetenv.FleetDir); err == nil {
		t.Skipf("skipped because %s exists on this host, so it, not the per-user state dir, is the default queue dir", fleetenv.FleetDir)
	}
	state := t.TempDir()
	t.Setenv("GPU_HOLD_DIR", "")
	t.Setenv("XDG_STATE_HOME", state)
	err := queueRun(&queueOptions{One: true, g: testGlobal("", "gpux"), Out: &bytes.Buffer{}, Now: time.Now})
	wantUnknown(t, err, "gpux", "gpu", "npu")
	if got := entries(t, state); len(got) != 0 {
		t.Errorf("gpu-hold queue created %q in $XDG_STATE_HOME", got)
	}
}

// A ticket that is not a number is refused before the queue is opened;
// the t.N form of a ticket's file name is taken as N.
func TestCancelNotANumber(t *testing.T) {
	dir := t.TempDir()
	for _, ticket := range []string{"banana", "-1", "1.5", "t.", "", "18446744073709551616"} {
		err := cancelRun(&cancelOptions{g: testGlobal(dir, "gpu"), Ticket: ticket, UID: os.Getuid(), Out: &bytes.Buffer{}})
		wantUsageErr(t, err, strconv.Quote(ticket)+" is not a ticket number")
	}
	err := cancelRun(&cancelOptions{g: testGlobal(dir, "gpu"), Ticket: "t.5", UID: os.Getuid(), Out: &bytes.Buffer{}})
	wantUsageErr(t, err, "no ticket 5 is waiting")
	if got := entries(t, dir); len(got) != 0 {
		t.Errorf("cancel left %q in the queue dir", got)
	}
}

// With no -r, the per-user default queue dir that nobody has used yet
// lists nothing, is not created, and is no error; nor is history.
func TestQueueAllOnFreshDir(t *testing.T) {
	if _, err := os.Stat(fleetenv.FleetDir); err == nil {
		t.Skipf("skipped because %s exists on this host, so it, not the per-user state dir, is the default queue dir", fleetenv.FleetDir)
	}
	state := t.TempDir()
	t.Setenv("GPU_HOLD_DIR", "")
	t.Setenv("XDG_STATE_HOME", state)
	var out bytes.Buffer
	if err := queueRun(&queueOptions{g: testGlobal("", "gpu"), Out: &out, Now: time.Now}); err != nil || !strings.Contains(out.String(), "every token is free") {
		t.Errorf("queue: %v, %q", err, out.String())
	}
	out.Reset()
	if err := historyRun(&historyOptions{g: testGlobal("", "gpu"), Out: &out, Warn: &out}); err != nil || out.String() != "no past holds on record\n" {
		t.Errorf("history: %v, %q", err, out.String())
	}
	if got := entries(t, state); len(got) != 0 {
		t.Errorf("created %q in $XDG_STATE_HOME", got)
	}
}
