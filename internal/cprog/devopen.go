// devopen.go owns the device opener: a process that opens a device node
// and keeps it, for the guard's tests (an intruder, a holder's payload).
package cprog

import "testing"

// devopen HOW NODE OUTFILE TERM opens NODE, with O_PATH when HOW is
// "path" (a node with no driver behind it opens no other way: the guard's
// scan sees the fd all the same) or O_RDONLY when it is "read" (what the
// kernel's device filter decides on). It writes "ok PID" or "err ERRNO
// PID" to OUTFILE (by a rename); on success it keeps the fd and sleeps
// until killed, ignoring TERM when TERM is "ignore".
const devopen = `#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
	char tmp[4096];
	FILE *f;
	int fd, err;
	if (argc != 5)
		return 2;
	if (!strcmp(argv[4], "ignore"))
		signal(SIGTERM, SIG_IGN);
	fd = open(argv[2], (!strcmp(argv[1], "path") ? O_PATH : O_RDONLY) | O_CLOEXEC);
	err = errno;
	snprintf(tmp, sizeof tmp, "%s.tmp", argv[3]);
	if (!(f = fopen(tmp, "w")))
		return 1;
	if (fd < 0)
		fprintf(f, "err %d %d\n", err, getpid());
	else
		fprintf(f, "ok %d\n", getpid());
	fclose(f);
	rename(tmp, argv[3]);
	if (fd < 0)
		return 1;
	for (;;)
		pause();
}
`

// DevOpen builds the device opener into dir and returns its path.
func DevOpen(t testing.TB, dir string) string { return buildIn(t, dir, "devopen", devopen) }
