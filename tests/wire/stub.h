/* A stub executor and a stub file worker for the wire tier: threads of the test process on the
 * far ends of the front's two channels (common/channel.h), speaking the orders of
 * proto/boxkite/executor/order.proto as the real ones do, without root, namespaces or a
 * sandbox — so that the front's state machines (exec, uploads, downloads, the quota, the
 * channels' back-pressure) are tested by themselves.
 *
 * At start the stub sends what the executor sends: the sandbox's state (ready) and FilesReady
 * with the file worker's channel. A Spawn runs a behaviour named by argv[0] on a thread of its
 * own, on real pipes:
 *   echo ARGS...  ARGS joined by spaces and a newline on stdout; exit 0
 *   cat           stdin to stdout; exit 0
 *   flood N       N bytes of 'x' on stdout; exit 0
 *   exit N        exit N
 *   sleep         nothing, until killed: Exited with signal 9
 *   hold          nothing, until stub_release() (exit 0) or killed
 *   fail-chdir    the spawn fails at the child's chdir step (ENOENT)
 * The file worker answers CreateTemp with a memfd, keeps what Commit names, answers OpenRead of
 * /workspace/NAME with NAME in the stub's directory, Usage with `usage`, List with
 * `list_entries` entries of `list_name_len`-byte names, Watch with Done (1 directory; `watch_key`
 * and `watch_path` say which) and Unwatch with Done; stub_changes() sends what a watch saw. */
#ifndef BK_WIRE_STUB_H
#define BK_WIRE_STUB_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "boxkite/executor/order.pb-c.h"

typedef struct stub stub;

/* Start both stubs; *executor_fd receives the front's end of the executor channel. dir: where
 * OpenRead finds files. 0, or -1 (printed why). */
int stub_start(stub **out, const char *dir, int *executor_fd);
/* Stop both, after the front has closed its ends. Accepts NULL. */
void stub_stop(stub *s);

/* What the stub saw and says; set or read by the tests. */
struct stub_state {
	atomic_uint spawns, kills, commits, usages, orders_seen;
	atomic_bool files_stalled;    /* while set, the file worker reads no order */
	atomic_uint_fast64_t usage;   /* what Usage answers */
	atomic_uint list_entries;     /* entries in a List answer */
	atomic_uint list_name_len;
	atomic_uint watches, unwatches;      /* Watch and Unwatch orders served */
	atomic_uint_fast64_t watch_key;      /* the last Watch's id */
	char watch_path[256];                /* and its path (under lock) */
	pthread_mutex_t lock;         /* the committed file */
	uint8_t *committed;
	size_t committed_len;
	uint32_t committed_mode;
	char committed_path[256];
};

struct stub_state *stub_state(stub *s);

/* Let one `hold` exec end (exit 0). */
void stub_release(stub *s);

/* The file worker's Changes event for watch: n changes, then end (a boxkite.v1.WatchEnd, 0:
 * none). From the test's thread. */
void stub_changes(stub *s, uint64_t watch, Boxkite__Executor__Change **changes, size_t n, uint32_t end);

#endif
