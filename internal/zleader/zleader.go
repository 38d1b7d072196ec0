// Package zleader builds, for tests only, a program whose main thread exits
// while another thread runs on: the kernel then shows the process as a
// zombie (state Z, no cmdline, environ or fds on its main thread) though it
// is alive, ignores TERM, and keeps whatever fds it inherited open.
package zleader

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/testenv"
)

// source: zleader PIDFILE. The live thread writes the pid to PIDFILE (by a
// rename, so a reader never sees it half written) once the main thread
// shows as a zombie, then sleeps until killed.
const source = `#include <pthread.h>
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

// Build compiles the program into a temporary directory and returns its
// path. A host without a C compiler fails the test in CI and skips it
// elsewhere.
func Build(t testing.TB) string {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		testenv.Need(t, "no C compiler (cc) to build the zombie-leader program: %v", err)
	}
	dir := t.TempDir()
	src, bin := filepath.Join(dir, "zleader.c"), filepath.Join(dir, "zleader")
	if err := os.WriteFile(src, []byte(source), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cc, "-pthread", "-O", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("building the zombie-leader program: %v\n%s", err, out)
	}
	return bin
}

// Start builds the program and starts it with env added to the test's own
// and files as its fds 3 and up; it returns once the main thread shows as a
// zombie. The process is killed (through os/exec's pidfd) and reaped when
// the test ends.
func Start(t testing.TB, env []string, files ...*os.File) *exec.Cmd {
	t.Helper()
	pidfile := filepath.Join(t.TempDir(), "pid")
	cmd := exec.Command(Build(t), pidfile)
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
