// Package cprog builds, for tests only, the small C programs that take
// shapes a shell cannot: a zombie leader (a process whose main thread has
// exited while another runs on: the kernel shows it as a zombie, with no
// cmdline, environ or fds on its main thread, though it is alive) and a
// hopper (a process that forks and exits in a loop, so a walk of /proc
// lists it before it is born and reads it after it is gone), both of which
// ignore TERM, a signal logger (who signalled it, by real uid), and a
// setuid program that becomes another user (E20).
package cprog

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/testenv"
)

// zleader PIDFILE: the live thread writes the pid to PIDFILE (by a rename,
// so a reader never sees it half written) once the main thread shows as a
// zombie, then sleeps until killed. It keeps the fds it inherited open.
const zleader = `#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char *pidfile;

static void *run(void *arg) {
	char path[64], buf[512], tmp[4096];
	FILE *f;
	(void)arg;
	snprintf(path, sizeof path, "/proc/%d/stat", getpid());
	for (;;) {
		size_t n = 0;
		char *p;
		if ((f = fopen(path, "r"))) {
			n = fread(buf, 1, sizeof buf - 1, f);
			fclose(f);
		}
		buf[n] = 0;
		p = strrchr(buf, ')');
		if (p && p[1] == ' ' && p[2] == 'Z')
			break;
		usleep(1000);
	}
	snprintf(tmp, sizeof tmp, "%s.tmp", pidfile);
	if ((f = fopen(tmp, "w"))) {
		fprintf(f, "%d\n", getpid());
		fclose(f);
		rename(tmp, pidfile);
	}
	for (;;)
		pause();
	return 0;
}

int main(int argc, char **argv) {
	pthread_t t;
	if (argc < 2)
		return 2;
	pidfile = argv[1];
	signal(SIGTERM, SIG_IGN);
	if (pthread_create(&t, 0, run, 0))
		return 1;
	pthread_exit(0);
}
`

// hopper COUNTFILE STOPFILE: each generation appends a byte to COUNTFILE,
// forks, and exits; its child sleeps 100 us and goes on. It stops when
// STOPFILE exists: a test's only sure way to end what escaped it, since a
// scan of /proc can miss it as a teardown's walk can.
const hopper = `#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

int main(int argc, char **argv) {
	int fd;
	if (argc < 3)
		return 2;
	fd = open(argv[1], O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	signal(SIGTERM, SIG_IGN);
	for (;;) {
		pid_t p;
		if (access(argv[2], F_OK) == 0)
			_exit(0);
		if (write(fd, "x", 1) < 0)
			_exit(1);
		p = fork();
		if (p < 0) {
			usleep(1000);
			continue;
		}
		if (p > 0)
			_exit(0);
		usleep(100);
	}
}
`

// ZombieLeader builds the zombie-leader program and returns its path.
func ZombieLeader(t testing.TB) string { return build(t, "zleader", zleader) }

// Hopper builds the hopper and returns its path.
func Hopper(t testing.TB) string { return build(t, "hopper", hopper) }

// build compiles src into a temporary directory and returns the program's
// path. A host without a C compiler fails the test in CI and skips it
// elsewhere.
func build(t testing.TB, name, src string) string {
	t.Helper()
	return buildIn(t, t.TempDir(), name, src)
}

// buildIn is build into dir.
func buildIn(t testing.TB, dir, name, src string) string {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		testenv.Need(t, "no C compiler (cc) to build the test program %s: %v", name, err)
	}
	file, bin := filepath.Join(dir, name+".c"), filepath.Join(dir, name)
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cc, "-pthread", "-O", "-o", bin, file).CombinedOutput(); err != nil {
		t.Fatalf("building the test program %s: %v\n%s", name, err, out)
	}
	return bin
}

// StartZombieLeader builds the zombie-leader program and starts it with env
// added to the test's own and files as its fds 3 and up; it returns once
// the main thread shows as a zombie. The process is killed (through
// os/exec's pidfd) and reaped when the test ends.
func StartZombieLeader(t testing.TB, env []string, files ...*os.File) *exec.Cmd {
	t.Helper()
	pidfile := filepath.Join(t.TempDir(), "pid")
	cmd := exec.Command(ZombieLeader(t), pidfile)
	cmd.Env = append(os.Environ(), env...)
	cmd.ExtraFiles = files
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(pidfile); err == nil {
			return cmd
		}
		if time.Now().After(deadline) {
			t.Fatal("test shape: the zombie-leader program's main thread never showed as a zombie")
		}
	}
}
