// Command gpu-hold-lobby is where a gpu-hold waits while tickets are
// ahead of its own: gpu-hold execs it, and it execs gpu-hold back (package
// lobby). It links nothing but the queue, so that a waiting hold costs the
// host little. main.go only hands over to the package.
package main

import (
	"os"

	"github.com/gpu-hold/gpu-hold/internal/lobby"
)

func main() {
	os.Exit(lobby.Main())
}
