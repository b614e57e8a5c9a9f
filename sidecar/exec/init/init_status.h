/* What an exec's init (boxkite-init --exec) tells the executor when its command ends: one
 * record on the status descriptor it was given, written just before it exits. Without it the
 * executor could only see the init's own exit status, and a command killed by a signal would
 * look like one that exited 128+N — the init, PID 1 of its namespace, cannot die of the same
 * signal itself. No record (the init was killed: a timeout, the OOM killer) means the init's own
 * status is the answer. */
#ifndef BK_INIT_STATUS_H
#define BK_INIT_STATUS_H

#include <stdint.h>

enum bk_init_how { BK_INIT_EXITED = 1, BK_INIT_SIGNALED = 2 };

struct bk_init_status {
	int32_t how;   /* enum bk_init_how */
	int32_t value; /* the exit code, or the signal */
};

/* boxkite-init's arguments in exec mode: --exec --status-fd=N -- ARGV... */
#define BK_INIT_EXEC_FLAG "--exec"
#define BK_INIT_STATUS_FLAG "--status-fd="

#endif
