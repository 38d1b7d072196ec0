// becomeuser.go owns the setuid program of E20: a member of a hold that
// becomes another user (as sudo or a setuid program that sets all its
// uids would) and then ignores TERM.
package cprog

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// becomeuser UID PIDFILE, installed setuid root: ignores TERM, writes its
// pid to PIDFILE (by a rename, while it is still root: UID may not write
// there), then sets its real, effective and saved uids and gids to UID and
// waits to be killed.
const becomeuser = `#define _GNU_SOURCE
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
	char tmp[4096];
	FILE *f;
	int id;
	if (argc != 3)
		return 2;
	id = atoi(argv[1]);
	snprintf(tmp, sizeof tmp, "%s.tmp", argv[2]);
	if (!(f = fopen(tmp, "w")))
		return 1;
	fprintf(f, "%d\n", getpid());
	fclose(f);
	signal(SIGTERM, SIG_IGN);
	rename(tmp, argv[2]);
	if (setgroups(0, 0) || setresgid(id, id, id) || setresuid(id, id, id)) {
		perror("becomeuser");
		return 1;
	}
	for (;;)
		pause();
}
`

// BecomeUser builds becomeuser into dir (one the test's users can execute
// from, on a filesystem that honours setuid) as a setuid-root program and
// returns its path.
func BecomeUser(t testing.TB, dir string) string {
	t.Helper()
	bin := buildIn(t, dir, "becomeuser", becomeuser)
	if err := os.Chown(bin, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := unix.Chmod(bin, 0o4755); err != nil { // os.Chmod drops 0o4000
		t.Fatal(err)
	}
	return bin
}
