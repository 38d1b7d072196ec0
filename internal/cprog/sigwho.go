// sigwho.go owns the signal logger: a TERM-ignoring process that logs who
// signalled it (the sender's real uid), for the tests of a reap's authority.
package cprog

import "testing"

// sigwho LOG PIDFILE catches TERM, INT and HUP with SA_SIGINFO,
// appends "sig=N uid=U pid=P" (the sender's real uid and pid, as the kernel
// fills them in) to LOG, and keeps running until KILLed: a TERM-ignoring
// member that tells whose authority the signal came with. Once its handlers
// are installed it writes its pid to PIDFILE (by a rename).
const sigwho = `#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int logfd;

static void on(int sig, siginfo_t *si, void *uc) {
	char b[128];
	int n = snprintf(b, sizeof b, "sig=%d uid=%d pid=%d\n", sig, (int)si->si_uid, (int)si->si_pid);
	(void)uc;
	if (n > 0)
		write(logfd, b, n);
}

int main(int argc, char **argv) {
	struct sigaction sa;
	char tmp[4096];
	FILE *f;
	if (argc != 3)
		return 2;
	logfd = open(argv[1], O_WRONLY | O_CREAT | O_APPEND, 0644);
	if (logfd < 0)
		return 1;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigaction(SIGTERM, &sa, 0);
	sigaction(SIGINT, &sa, 0);
	sigaction(SIGHUP, &sa, 0);
	snprintf(tmp, sizeof tmp, "%s.tmp", argv[2]);
	if (!(f = fopen(tmp, "w")))
		return 1;
	fprintf(f, "%d\n", getpid());
	fclose(f);
	rename(tmp, argv[2]);
	for (;;)
		pause();
}
`

// SigWho builds the signal logger into dir (one the test's users can
// execute from) and returns its path.
func SigWho(t testing.TB, dir string) string { return buildIn(t, dir, "sigwho", sigwho) }
