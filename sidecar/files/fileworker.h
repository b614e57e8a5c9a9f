/* The file worker: every file operation of the front's (Stat, List, OpenRead, CreateTemp,
 * Commit, Mkdir, Symlink, Remove, Rename, Usage, Watch and Unwatch: watcher.h), served in a process of its own, so that no filesystem
 * walk runs in the privileged executor and none can delay a spawn. It is forked by the executor
 * for each sandbox that is ready, and then is the sandbox user in the sandbox's mount namespace
 * and a network namespace of its own with nothing in it: no capability in any set, an empty
 * bounding set, no_new_privs, not dumpable (no ptrace, no /proc/<pid>/mem for the uid it shares
 * with sandboxed code), and a seccomp filter of its own (filter.c: files, its channel, memory).
 * It talks to the front only, over a channel of its own whose far end the executor hands the
 * front (event FilesReady); it has no channel to the executor. Single-threaded, one order at a
 * time: a long walk delays other file orders, never an exec. */
#ifndef BK_FILEWORKER_H
#define BK_FILEWORKER_H

#include <linux/filter.h>
#include <sys/types.h>

#include "error.h"
#include "exec/child.h"
#include "orders.h"
#include "sbpath.h"

typedef struct bk_fileworker_config {
	const bk_roots *roots;
	const bk_child_creds *creds;     /* the sandbox user, and the bounding set to empty */
	const struct sock_fprog *filter; /* bk_seccomp_compile_files() */
	int userns;                      /* the sandbox's user namespace (exec/userns.h); -1: none */
} bk_fileworker_config;

typedef struct bk_fileworker {
	pid_t pid;   /* 0: none */
	int pidfd;   /* readable when it has exited */
} bk_fileworker;

/* The orders a file worker serves, one row each. */
extern const bk_order_table bk_fileworker_orders;

/* Start a worker for the sandbox whose mount namespace is mnt_fd; *front_fd receives the front's
 * end of its channel (for FilesReady). */
int bk_fileworker_start(const bk_fileworker_config *cfg, int mnt_fd, bk_fileworker *w, int *front_fd,
			bk_error **err);
/* Kill and reap it, if there is one. */
void bk_fileworker_stop(bk_fileworker *w);
/* It exited by itself (its pidfd became readable): reap it. Its wait status. */
int bk_fileworker_reap(bk_fileworker *w);

#endif
