// helper.go owns the bench binary's helper modes, the payloads the bench
// runs bare, under gpu-hold and under flock: a spawner of /bin/true (alone,
// or taking turns with a peer), process trees of sleep copies (wide or
// bushy, cooperative or TERM-ignoring), a bounded fork storm, a start/end
// time stamper and a gate that waits for a file. They are run as
// `bench helper MODE ARGS...` and inherit the bench's marker from the
// environment.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/plant"
)

// helperMain runs one helper mode and exits.
func helperMain(args []string) {
	if len(args) == 0 {
		fatalf("helper: no mode given")
	}
	mode, a := args[0], args[1:]
	switch mode {
	case "spawn": // N OUTFILE TOKEN: fork+exec /bin/true TOKEN N times; write the loop's ns
		n, token := atoi(arg(a, 0)), arg(a, 2)
		t0 := time.Now()
		for i := 0; i < n; i++ {
			spawnTrue(token)
		}
		writeFile(arg(a, 1), strconv.FormatInt(int64(time.Since(t0)), 10))
		return
	case "alternate": // N OUTFILE TOKEN INFIFO OUTFIFO FIRST(0|1): N spawns, taking turns with a peer; write the sum of this side's spawn times
		alternate(atoi(arg(a, 0)), arg(a, 1), arg(a, 2), arg(a, 3), arg(a, 4), arg(a, 5) == "1")
		return
	case "tree": // wide|bushy N ignore(0|1) READYFILE: build the tree, write READYFILE, wait for ever
		shape, n, ignore := arg(a, 0), atoi(arg(a, 1)), arg(a, 2) == "1"
		if ignore {
			signal.Ignore(syscall.SIGTERM) // SIG_IGN is inherited across exec
		}
		buildTree(shape, n)
		writeFile(arg(a, 3), strconv.FormatInt(time.Now().UnixNano(), 10))
		forever()
	case "node": // M ignore: M sleep children, then "ok" on stdout, then wait for ever
		if arg(a, 1) == "1" {
			signal.Ignore(syscall.SIGTERM)
		}
		spawnSleeps(atoi(arg(a, 0)))
		fmt.Println("ok")
		forever()
	case "storm": // WORKERS CAP ignore(0|1) READYFILE: workers that together fill CAP sleeps, then fork /bin/true without pause
		w, capN := atoi(arg(a, 0)), atoi(arg(a, 1))
		if arg(a, 2) == "1" {
			signal.Ignore(syscall.SIGTERM)
		}
		ok := startNodes(w, func(int) []string { return []string{"stormworker", strconv.Itoa(capN / w)} })
		waitOK(ok, w)
		writeFile(arg(a, 3), strconv.FormatInt(time.Now().UnixNano(), 10))
		forever()
	case "stormworker": // CAP
		spawnSleeps(atoi(arg(a, 0)))
		fmt.Println("ok")
		os.Stdout.Close()
		for {
			pid, err := syscall.ForkExec("/bin/true", []string{"/bin/true"}, &syscall.ProcAttr{Env: os.Environ()})
			if err == nil {
				var ws syscall.WaitStatus
				syscall.Wait4(pid, &ws, 0, nil)
			}
		}
	case "stamp": // FILE ID: append "ID start NS" now and "ID end NS" at exit
		f, err := os.OpenFile(arg(a, 0), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			fatalf("helper stamp: %v", err)
		}
		fmt.Fprintf(f, "%s start %d\n", arg(a, 1), time.Now().UnixNano())
		fmt.Fprintf(f, "%s end %d\n", arg(a, 1), time.Now().UnixNano())
		f.Close()
		return
	case "fillers": // N: N sleeps holding busyFDs files each; "ready" on stdout; ends them at stdin's EOF
		fillersHelper(atoi(arg(a, 0)))
		return
	case "blockread": // PATH: a thread asleep in read(2) of PATH, "ready" on stdout, then wait for ever
		if err := plant.BlockRead(arg(a, 0)); err != nil {
			fatalf("helper blockread: %v", err)
		}
		fmt.Println("ready")
		forever()
	case "opener": // PATH RATE OUTFILE: open PATH RATE times a second until TERM; write the count
		openLoop(arg(a, 0), atoi(arg(a, 1)), arg(a, 2))
	case "gate": // READY GATE: write READY, then return once GATE exists
		writeFile(arg(a, 0), strconv.FormatInt(time.Now().UnixNano(), 10))
		for {
			if _, err := os.Stat(arg(a, 1)); err == nil {
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	fatalf("helper: unknown mode %q", mode)
}

// buildTree builds n processes counting the caller: wide is the caller with
// n-1 sleep children; bushy is the caller, k=ceil(sqrt(n)) node processes
// and the rest as sleep children of the nodes (depth 2).
func buildTree(shape string, n int) {
	if n < 1 {
		n = 1
	}
	switch shape {
	case "wide":
		spawnSleeps(n - 1)
	case "bushy":
		k := 1
		for k*k < n {
			k++
		}
		if k > n-1 {
			k = n - 1
		}
		rest := n - 1 - k
		ignore := "0"
		if signal.Ignored(syscall.SIGTERM) {
			ignore = "1"
		}
		ok := startNodes(k, func(i int) []string {
			m := rest / k
			if i < rest%k {
				m++
			}
			return []string{"node", strconv.Itoa(m), ignore}
		})
		waitOK(ok, k)
	default:
		fatalf("helper tree: shape %q is not wide or bushy", shape)
	}
}

// spawnSleeps starts n `sleep 600` children and does not wait for them.
func spawnSleeps(n int) {
	path, err := exec.LookPath("sleep")
	if err != nil {
		fatalf("helper: %v", err)
	}
	attr := &syscall.ProcAttr{Env: os.Environ()}
	argv := []string{"sleep", "600"}
	for i := 0; i < n; i++ {
		if _, err := syscall.ForkExec(path, argv, attr); err != nil {
			fatalf("helper: starting sleep %d of %d: %v", i+1, n, err)
		}
	}
}

// startNodes starts k copies of this binary in helper modes args(i), their
// stdout on one shared pipe, and returns the pipe's read end.
func startNodes(k int, args func(i int) []string) *os.File {
	self, err := os.Executable()
	if err != nil {
		fatalf("helper: %v", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		fatalf("helper: %v", err)
	}
	for i := 0; i < k; i++ {
		argv := append([]string{self, "helper"}, args(i)...)
		if _, err := syscall.ForkExec(self, argv, &syscall.ProcAttr{Env: os.Environ(), Files: []uintptr{0, w.Fd(), 2}}); err != nil {
			fatalf("helper: starting node %d of %d: %v", i+1, k, err)
		}
	}
	w.Close()
	return r
}

// waitOK reads k "ok" lines from r.
func waitOK(r *os.File, k int) {
	sc := bufio.NewScanner(r)
	for got := 0; got < k; got++ {
		if !sc.Scan() {
			fatalf("helper: only %d of %d nodes reported ready", got, k)
		}
	}
}

// spawnTrue fork+execs /bin/true TOKEN and waits for it.
func spawnTrue(token string) {
	pid, err := syscall.ForkExec("/bin/true", []string{"/bin/true", token}, &syscall.ProcAttr{Env: os.Environ()})
	if err != nil {
		fatalf("helper spawn: %v", err)
	}
	var ws syscall.WaitStatus
	for {
		if _, err := syscall.Wait4(pid, &ws, 0, nil); err != syscall.EINTR {
			break
		}
	}
}

// alternate spawns n times, one spawn per turn, taking turns with a peer
// through two FIFOs (a byte on out hands the turn over; the first side
// starts without one), and writes the sum of its own spawn times to outFile.
// The two sides open the FIFOs in opposite orders, so neither open waits
// for ever; a peer that dies ends this side too (EOF or EPIPE), never a hang.
func alternate(n int, outFile, token, inPath, outPath string, first bool) {
	open := func(path string, flag int) *os.File {
		f, err := os.OpenFile(path, flag, 0)
		if err != nil {
			fatalf("helper alternate: %v", err)
		}
		return f
	}
	var in, out *os.File
	if first {
		out = open(outPath, os.O_WRONLY)
		in = open(inPath, os.O_RDONLY)
	} else {
		in = open(inPath, os.O_RDONLY)
		out = open(outPath, os.O_WRONLY)
	}
	defer in.Close()
	defer out.Close()
	turn := []byte{1}
	var sum time.Duration
	for i := 0; i < n; i++ {
		if i > 0 || !first {
			if _, err := io.ReadFull(in, turn); err != nil {
				fatalf("helper alternate: the peer is gone at spawn %d of %d: %v", i+1, n, err)
			}
		}
		t0 := time.Now()
		spawnTrue(token)
		sum += time.Since(t0)
		if first || i < n-1 { // the second side's last turn hands nothing over: its peer is done
			if _, err := out.Write(turn); err != nil {
				fatalf("helper alternate: the peer is gone at spawn %d of %d: %v", i+1, n, err)
			}
		}
	}
	writeFile(outFile, strconv.FormatInt(int64(sum), 10))
}

func arg(a []string, i int) string {
	if i < len(a) {
		return a[i]
	}
	fatalf("helper: missing argument %d", i+1)
	return ""
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		fatalf("helper: %q is not a number", s)
	}
	return n
}

// writeFile writes s to path atomically (rename), so a reader sees all or nothing.
func writeFile(path, s string) {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(s), 0o644); err != nil {
		fatalf("helper: %v", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		fatalf("helper: %v", err)
	}
}

func fatalf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", a...)
	os.Exit(2)
}

// forever blocks until a signal ends the process.
func forever() {
	for {
		time.Sleep(time.Hour)
	}
}
