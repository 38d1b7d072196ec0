// enter.go owns the way in: the full image hands its waiting ticket over
// and execs the lobby.
package lobby

import (
	"fmt"
	"os"
	"syscall"

	"github.com/gpu-hold/gpu-hold/queue"
)

// Enter execs the lobby at path with st and w's ticket; sigs are the
// signals that end the wait. It returns only when it could not (the
// ticket is then kept by this image, as before).
func Enter(path string, w queue.Handable, st State, sigs []os.Signal) error {
	h, err := w.Handover()
	if err != nil {
		return err
	}
	st.Ticket = h
	st.Procs, st.HadProcs = os.LookupEnv(envProcs)
	for _, s := range sigs {
		st.Signals = append(st.Signals, int(s.(syscall.Signal)))
	}
	env := append(environ(envProcs, envLobby, envResume), envProcs+"=1", encode(envLobby, st))
	err = execAs(path, env)
	w.Keep()
	return fmt.Errorf("cannot exec %s (%v)", path, err)
}
