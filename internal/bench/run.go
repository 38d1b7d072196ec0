// run.go owns running gpu-hold (and other commands) from the bench: the
// command line, the marker in the environment, the JSON log read live from
// stderr, the exit time and the resource usage of the finished process.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// holdSpec is one gpu-hold invocation.
type holdSpec struct {
	Dir     string
	Track   string        // proc or bpf
	MaxHold time.Duration // 0: none
	Grace   time.Duration // <0: gpu-hold's default
	Dump    string        // record path ("" : none given)
	Env     []string      // extra environment (run markers)
	Cmd     []string
}

// logLine is one JSON line of gpu-hold's log.
type logLine struct {
	Message string
	Time    time.Time
	Fields  map[string]any
}

// child is a started process whose stderr is read live.
type child struct {
	cmd    *exec.Cmd
	start  time.Time
	exitAt time.Time
	err    error // from Wait
	done   chan struct{}
	eof    chan struct{} // closed when stderr has been read to its end

	mu      sync.Mutex
	lines   []logLine
	other   []string // stderr lines that are not gpu-hold JSON (payload output)
	changed chan struct{}
}

// holdArgs builds gpu-hold's argument list for s.
func (b *bench) holdArgs(s holdSpec) []string {
	a := []string{"--dir", s.Dir, "--log-format", "json", "--track", s.Track, "--cgroup", b.cfg.Cgroup}
	if s.MaxHold > 0 {
		a = append(a, "-t", fmt.Sprintf("%dms", s.MaxHold.Milliseconds()))
	}
	if s.Grace >= 0 {
		a = append(a, "-g", fmt.Sprintf("%dms", s.Grace.Milliseconds()))
	}
	if s.Dump != "" {
		a = append(a, "--dump", s.Dump)
	}
	return append(append(a, "--"), s.Cmd...)
}

// startHold starts gpu-hold for s.
func (b *bench) startHold(s holdSpec) (*child, error) {
	return b.startProc(append([]string{b.bin}, b.holdArgs(s)...), s.Env, nil)
}

// startProc starts argv with the bench's environment plus env (the marker is
// in the bench's own environment), stdout discarded, stderr read live.
// attr, when not nil, replaces the SysProcAttr (cgroup placement).
func (b *bench) startProc(argv, env []string, attr *syscall.SysProcAttr) (*child, error) {
	c := exec.Command(argv[0], argv[1:]...)
	c.Env = append(os.Environ(), env...)
	c.SysProcAttr = attr
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	c.Stderr = w
	p := &child{cmd: c, done: make(chan struct{}), eof: make(chan struct{}), changed: make(chan struct{})}
	p.start = time.Now()
	if err := c.Start(); err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("starting %s: %w", argv[0], err)
	}
	w.Close()
	go p.read(r)
	go func() {
		p.err = c.Wait()
		p.exitAt = time.Now()
		close(p.done)
	}()
	return p, nil
}

// read parses stderr until EOF.
func (p *child) read(r *os.File) {
	defer close(p.eof)
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		text := sc.Text()
		var m map[string]any
		p.mu.Lock()
		if json.Unmarshal([]byte(text), &m) == nil && m["prog"] == "gpu-hold" {
			l := logLine{Fields: m}
			l.Message, _ = m["message"].(string)
			if ts, ok := m["time"].(string); ok {
				l.Time, _ = time.Parse(time.RFC3339Nano, ts)
			}
			p.lines = append(p.lines, l)
		} else if len(p.other) < 50 {
			p.other = append(p.other, text)
		}
		close(p.changed)
		p.changed = make(chan struct{})
		p.mu.Unlock()
	}
}

// line returns the last log line whose message starts with msg.
func (p *child) line(msg string) (logLine, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(p.lines[i].Message, msg) {
			return p.lines[i], true
		}
	}
	return logLine{}, false
}

// waitLine waits until a log line whose message starts with msg appears, the
// process exits (and its stderr is read), or limit passes.
func (p *child) waitLine(msg string, limit time.Duration) (logLine, bool) {
	t := time.NewTimer(limit)
	defer t.Stop()
	for {
		p.mu.Lock()
		ch := p.changed
		p.mu.Unlock()
		if l, ok := p.line(msg); ok {
			return l, true
		}
		select {
		case <-ch:
		case <-p.done:
			// Its last lines may still be in the pipe: wait for the
			// reader to reach the end (a leftover holding the pipe
			// open bounds this at a second).
			select {
			case <-p.eof:
			case <-time.After(time.Second):
			}
			return p.line(msg)
		case <-t.C:
			return logLine{}, false
		}
	}
}

// wait waits for exit up to limit; on timeout it kills the process (and
// returns an error).
func (p *child) wait(limit time.Duration) error {
	select {
	case <-p.done:
		return nil
	case <-time.After(limit):
		p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
		return fmt.Errorf("%s did not exit within %v; killed it", p.cmd.Args[0], limit)
	}
}

// code is the exit code (-1 when killed by a signal or not exited).
func (p *child) code() int {
	if p.cmd.ProcessState == nil {
		return -1
	}
	return p.cmd.ProcessState.ExitCode()
}

// field is a numeric field of the last line with message msg (NaN if absent).
func (p *child) field(msg, key string) float64 {
	l, ok := p.line(msg)
	if !ok {
		return nan
	}
	f, ok := l.Fields[key].(float64)
	if !ok {
		return nan
	}
	return f
}

// describe says what went wrong, for a failed run.
func (p *child) describe() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "%s exited %d", strings.Join(p.cmd.Args, " "), p.code())
	for _, l := range p.lines {
		if lv, _ := l.Fields["level"].(string); lv == "warn" || lv == "error" {
			fmt.Fprintf(&b, "\n  %s: %s", lv, l.Message)
			if e, ok := l.Fields["error"].(string); ok {
				fmt.Fprintf(&b, " (%s)", e)
			}
		}
	}
	for _, o := range p.other {
		fmt.Fprintf(&b, "\n  stderr: %s", o)
	}
	return b.String()
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
