// Command gpu-hold runs a job under an exclusive per-resource token and ends
// every process the job created when the hold ends. main.go only wires the
// root command to the process exit status.
package main

import "os"

func main() {
	os.Exit(execute(os.Args[1:]))
}
