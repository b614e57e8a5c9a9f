/* boxkite-egress: the egress proxy (docs/ARCHITECTURE.md, "Egress"). Executed by boxkite-executor
 * — as a user of its own, no capability, no_new_privs, an empty environment, the channel on
 * descriptor 3 — never by hand. It confines itself before it reads its first order. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "confine.h"
#include "egress.h"
#include "log.h"

/* Where the executor puts the channel (sidecar/exec/egress.c). */
#define EGRESS_CHANNEL_FD 3

int main(int argc, char **argv)
{
	bk_error *err = NULL;

	(void)argv;
	if (argc != 1) {
		fprintf(stderr, "boxkite-egress is started by boxkite-executor, with no arguments\n");
		return 2;
	}
	/* A peer that goes away is an error on its socket, not a signal. */
	signal(SIGPIPE, SIG_IGN);
	/* Nothing but stdio and the channel. */
	if (syscall(SYS_close_range, EGRESS_CHANNEL_FD + 1, ~0U, 0) < 0 || bk_egress_confine(&err) < 0) {
		bk_log(BK_LOG_ERROR, "egress: %s", err ? bk_error_msg(err) : strerror(errno));
		bk_error_free(err);
		return 1;
	}
	return bk_egress_main(EGRESS_CHANNEL_FD);
}
