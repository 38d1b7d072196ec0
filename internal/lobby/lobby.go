// Package lobby holds a waiting hold's slim image. A hold with tickets
// ahead of its own has nothing to do but wait, yet as the full
// gpu-hold it costs the host a Go process that links, and has set up,
// everything a hold needs. It execs gpu-hold-lobby instead: a small
// binary of its own (this package and the queue), with one scheduler
// thread, that only waits (queue.WaitAhead) with the ticket it keeps
// across the exec (same pid and start time, same lock fd). Near the head
// of the queue, on a signal, at the end of the wait allowance, or when its
// ticket is removed, it execs the full image back, which adopts the
// ticket and goes on as if it had waited itself.
// lobby.go owns the state the two images hand each other.
package lobby

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/gpu-hold/gpu-hold/queue"
)

// Binary is the lobby's executable, installed beside gpu-hold.
const Binary = "gpu-hold-lobby"

// The state travels in the environment, one variable per direction: the
// full image reads and removes envResume before anything else, so no
// payload ever sees it.
const (
	envLobby  = "GPU_HOLD_LOBBY"
	envResume = "GPU_HOLD_RESUME"
	envProcs  = "GOMAXPROCS"
)

// State is a waiting hold between its images.
type State struct {
	Exe      string         `json:"exe"` // the full image, to exec back
	Dir      string         `json:"dir"`
	Resource string         `json:"resource"`
	Ticket   queue.Handover `json:"ticket"`
	HoldID   string         `json:"hold_id"`
	Queued   time.Time      `json:"queued"`
	Deadline time.Time      `json:"deadline,omitzero"` // the wait allowance's end (zero: none)
	// Within: the lobby hands back once at most this many live tickets
	// are ahead, so that the full image is back before its turn.
	Within int `json:"within"`
	// Signals end the wait (the full image's); Signal is the one that
	// did (0: none), which the full image then ends the hold with.
	Signals []int `json:"signals"`
	Signal  int   `json:"signal,omitempty"`
	// Procs is the caller's GOMAXPROCS, restored on the way back (the
	// lobby runs with 1); HadProcs says the caller had one.
	Procs    string `json:"procs,omitempty"`
	HadProcs bool   `json:"had_procs,omitempty"`
}

// TakeResume returns the state the lobby handed back (nil: this image
// was not started by the lobby), and removes it from the environment.
func TakeResume() (*State, error) {
	v, ok := os.LookupEnv(envResume)
	if !ok {
		return nil, nil
	}
	os.Unsetenv(envResume)
	return decode(envResume, v)
}

func decode(name, v string) (*State, error) {
	var st State
	if err := json.Unmarshal([]byte(v), &st); err != nil || st.Exe == "" || st.Dir == "" || st.Resource == "" || st.HoldID == "" || st.Ticket.Seq == 0 || len(st.Signals) == 0 {
		return nil, fmt.Errorf("%s is not a waiting hold's state (%.60q): only gpu-hold sets it; unset it", name, v)
	}
	return &st, nil
}

func encode(name string, st State) string {
	b, _ := json.Marshal(st)
	return name + "=" + string(b)
}
