/* boxkite-init: the sandbox's first process. In local mode boxkited starts it as PID 1 of the
 * sandbox it builds; in a pod it is the sandbox container's command (the executor finds it by
 * this name). It only reaps: orphans re-parented to it are waited for, so none stays a zombie,
 * and it exits on SIGTERM or SIGINT so the container stops promptly.
 *
 * Built static: it runs inside the sandbox's root, which need not have our libraries. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	sigset_t set;
	int sig;

	if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		printf("Usage: boxkite-init\n\nThe boxkite sandbox's init: reaps orphans until SIGTERM or SIGINT.\n");
		return 0;
	}
	/* When it is not PID 1 (a pod's PID 1 is the pause container), orphans of its
	 * descendants still come to it. */
	if (getpid() != 1 && prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
		perror("boxkite-init: PR_SET_CHILD_SUBREAPER");

	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigprocmask(SIG_BLOCK, &set, NULL);
	for (;;) {
		sig = sigwaitinfo(&set, NULL);
		if (sig < 0) {
			if (errno == EINTR)
				continue;
			perror("boxkite-init: sigwaitinfo");
			return 1;
		}
		if (sig == SIGTERM || sig == SIGINT)
			return 0;
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
	}
}
