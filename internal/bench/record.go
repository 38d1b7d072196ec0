// record.go owns reading a hold's record (JSON lines, see record/record.go)
// as far as the bench needs it: the last hold header (payload, counters,
// times) and the processes the lineage saw.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"time"
)

// recIdent is a process identity as the record writes it.
type recIdent struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start"`
}

// recHold is the part of the hold header the bench reads.
type recHold struct {
	Backend string    `json:"backend"`
	Cgroup  string    `json:"cgroup"`
	Payload *recIdent `json:"payload"`
	Times   struct {
		Granted       time.Time `json:"granted"`
		PayloadStart  time.Time `json:"payload_start"`
		Deadline      time.Time `json:"deadline"`
		TeardownStart time.Time `json:"teardown_start"`
		KillStart     time.Time `json:"kill_start"`
		TeardownEnd   time.Time `json:"teardown_end"`
		Released      time.Time `json:"released"`
	} `json:"times"`
	Counters struct {
		LostEvents  uint64 `json:"lost_events"`
		MapOverflow uint64 `json:"map_overflow"`
		Members     uint64 `json:"members"`
	} `json:"counters"`
	DroppedEvents uint64 `json:"dropped_events"`
	// Usage is the hold process's own (getrusage RUSAGE_SELF at the
	// record's close): its payload's CPU is not in it, as it is in the
	// rusage of wait(2).
	Usage *struct {
		UserMS   float64 `json:"user_ms"`
		SysMS    float64 `json:"sys_ms"`
		MaxRSSKB int64   `json:"max_rss_kb"`
	} `json:"usage"`
}

// cpuMS is the hold's own user+sys ms (NaN when the record has none).
func (h *recHold) cpuMS() float64 {
	if h.Usage == nil {
		return math.NaN()
	}
	return h.Usage.UserMS + h.Usage.SysMS
}

// recLine is one line of the record.
type recLine struct {
	Type     string   `json:"type"`
	Hold     *recHold `json:"hold"`
	Kind     string   `json:"kind"`
	PID      int      `json:"pid"`
	Start    uint64   `json:"start"`
	PPID     int      `json:"ppid"`
	Filename string   `json:"filename"`
	Argv     []string `json:"argv"`
}

// record is a read record.
type record struct {
	Hold   recHold
	Events []recLine
}

// readRecord reads the record at path; the last hold header wins.
func readRecord(path string) (*record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rec := &record{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 2<<20)
	seenHold := false
	for sc.Scan() {
		var l recLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			continue // a line cut by a crash: the rest still counts
		}
		switch l.Type {
		case "hold":
			if l.Hold != nil {
				rec.Hold, seenHold = *l.Hold, true
			}
		case "event":
			rec.Events = append(rec.Events, l)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading record %s: %w", path, err)
	}
	if !seenHold {
		return nil, fmt.Errorf("record %s has no hold header", path)
	}
	return rec, nil
}

// spawned counts the distinct processes the spawner made that the record
// saw: every process other than the payload that exec'd /bin/true with
// token as its argument, or was forked by the payload itself (a child seen
// before its exec still carries the spawner's argv). It also returns how
// many were seen with that exec.
func (r *record) spawned(token string) (seen, execs int) {
	ids := map[recIdent]bool{}
	execd := map[recIdent]bool{}
	var payload recIdent
	if r.Hold.Payload != nil {
		payload = *r.Hold.Payload
	}
	for _, e := range r.Events {
		id := recIdent{e.PID, e.Start}
		if id == payload {
			continue
		}
		switch {
		case e.Kind == "exec" && len(e.Argv) == 2 && e.Argv[1] == token:
			ids[id], execd[id] = true, true
		case e.Kind == "fork" && payload.PID > 0 && e.PPID == payload.PID:
			ids[id] = true
		}
	}
	return len(ids), len(execd)
}
