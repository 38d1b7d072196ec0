// Package etcdtest runs a real etcd for tests and the bench: it builds
// internal/etcdserver with `go build` (once per process) and runs it as a
// separate process on loopback ports, so the server never links into what
// is tested, and a test can stop, restart or freeze it. GPU_HOLD_TEST_ETCD
// names a prebuilt etcdserver instead (no Go toolchain needed then).
package etcdtest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BinEnv names a prebuilt etcdserver.
const BinEnv = "GPU_HOLD_TEST_ETCD"

var (
	buildOnce sync.Once
	built     string
	buildErr  error
	buildDir  string
)

// Binary returns the etcdserver program, building it on first use.
func Binary() (string, error) {
	if b := os.Getenv(BinEnv); b != "" {
		return b, nil
	}
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "gpu-hold-etcdserver-")
		if buildErr != nil {
			return
		}
		built = filepath.Join(buildDir, "etcdserver")
		cmd := exec.Command("go", "build", "-o", built, "github.com/gpu-hold/gpu-hold/internal/etcdserver")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build internal/etcdserver: %v\n%s", err, out)
		}
	})
	return built, buildErr
}

// Cleanup removes the built program (call it from TestMain after m.Run).
func Cleanup() {
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
}

// Server is one etcd member on loopback.
type Server struct {
	Endpoint string // host:port for clients
	data     string
	client   string
	peer     string
	bin      string
	tls      []string // the server's TLS flags
	Env      []string // extra environment of the server process (a test marker)
	mu       sync.Mutex
	cmd      *exec.Cmd
}

// Start builds (once) and starts a server with a private data dir; it is
// killed when t ends.
func Start(t testing.TB, env ...string) *Server {
	t.Helper()
	s, err := StartIn(t.TempDir(), env...)
	if err != nil {
		t.Fatalf("etcd for the test: %v", err)
	}
	t.Cleanup(s.Kill)
	return s
}

// StartIn starts a server with its data in dir (for the bench); the
// caller kills it.
func StartIn(dir string, env ...string) (*Server, error) { return startIn(dir, "", "", "", env) }

// StartTLS starts a server that serves clients over TLS with cert and
// key and, when ca is set, requires client certs that chain to it.
func StartTLS(t testing.TB, cert, key, ca string) *Server {
	t.Helper()
	s, err := startIn(t.TempDir(), cert, key, ca, nil)
	if err != nil {
		t.Fatalf("etcd for the test: %v", err)
	}
	t.Cleanup(s.Kill)
	return s
}

func startIn(dir, cert, key, ca string, env []string) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin, data: dir, Env: env}
	scheme := "http://"
	if cert != "" {
		scheme = "https://"
		s.tls = []string{"-cert", cert, "-key", key, "-ca", ca}
	}
	// A port free when picked can be taken before the server binds it
	// (another test's server, a client's ephemeral port): pick again.
	for try := 0; ; try++ {
		cp, err := freePort()
		if err != nil {
			return nil, err
		}
		pp, err := freePort()
		if err != nil {
			return nil, err
		}
		s.Endpoint = "127.0.0.1:" + cp
		s.client, s.peer = scheme+s.Endpoint, "http://127.0.0.1:"+pp
		err = s.start(50, true)
		if err == nil {
			return s, nil
		}
		if try == 4 || !strings.Contains(err.Error(), portTaken) {
			return nil, fmt.Errorf("starting etcd: %v", err)
		}
	}
}

// URL is the --queue URL for prefix.
func (s *Server) URL(prefix string) string {
	return "etcd://" + s.Endpoint + "/" + strings.TrimPrefix(prefix, "/")
}

// Restart starts the server again (same data, same ports) and waits until
// it serves.
func (s *Server) Restart() error {
	return s.start(50, false) // the old listener may linger a moment
}

// portTaken is what the server says when its port is another's.
const portTaken = "address already in use"

// start starts the server and waits until it serves, trying up to tries
// times; with newPorts, a port taken ends the tries at once, for the
// caller to pick others.
func (s *Server) start(tries int, newPorts bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return errors.New("etcd is running")
	}
	var lastErr error
	for try := 0; try < tries; try++ {
		cmd := exec.Command(s.bin, append([]string{"-data", s.data, "-client", s.client, "-peer", s.peer}, s.tls...)...)
		cmd.Env = append(os.Environ(), s.Env...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			return err
		}
		ready := make(chan bool, 1)
		go func() {
			sc := bufio.NewScanner(out)
			ok := sc.Scan() && sc.Text() == "ready"
			ready <- ok
			for sc.Scan() {
			}
		}()
		select {
		case ok := <-ready:
			if ok {
				s.cmd = cmd
				return nil
			}
		case <-time.After(60 * time.Second):
		}
		cmd.Process.Kill()
		cmd.Wait()
		lastErr = fmt.Errorf("etcdserver did not become ready: %s", stderr.String())
		if newPorts && strings.Contains(stderr.String(), portTaken) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return lastErr
}

// Stop ends the server (TERM, then KILL after 10s) and waits for it.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-done
	}
	s.cmd = nil
}

// Kill ends the server at once.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s.cmd = nil
}

// freePort is a loopback port nobody listens on (now).
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("no free loopback port: %v", err)
	}
	defer l.Close()
	_, p, _ := net.SplitHostPort(l.Addr().String())
	return p, nil
}
