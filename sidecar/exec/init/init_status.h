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

/* boxkite-init's arguments in exec mode: --exec --status-fd=N -- ARGV..., or prepared ahead
 * (spawn.h, "Prepared ahead"): --exec --status-fd=N --order-fd=M, and the command comes later as
 * an order on M. */
#define BK_INIT_EXEC_FLAG "--exec"
#define BK_INIT_STATUS_FLAG "--status-fd="
#define BK_INIT_ORDER_FLAG "--order-fd="

/* The order an init prepared ahead waits for on its order descriptor (a stream socket): this
 * head, then `len` bytes of NUL-terminated strings — the working directory's root, the rest of it
 * relative to that root, argc arguments, envc environment entries. The init answers with one
 * bk_init_ack on the same socket once it is in the working directory (errnum 0), or could not
 * enter it (then it exits), and runs the command. */
#define BK_INIT_ORDER_MAGIC 0x626b6f31u /* "bko1" */
#define BK_INIT_ORDER_MAX (8u << 20)

struct bk_init_order {
	uint32_t magic;
	uint32_t argc, envc;
	uint32_t len;
};

struct bk_init_ack {
	int32_t errnum; /* 0: in the working directory, the command starts; > 0: why it could not
			   enter it; BK_INIT_ACK_DEFER: a path only the exec path decides (below) */
};

/* The exec's filter refuses openat2 (its mode cannot be checked), so the init walks the directory
 * a component at a time, refusing nothing the exec path would accept: a symlink, a ".." or another
 * mount on the way is left to the exec path (the executor then makes the exec whole, its child
 * resolving with openat2's RESOLVE_BENEATH before the filter is loaded). */
#define BK_INIT_ACK_DEFER (-1)

#endif
