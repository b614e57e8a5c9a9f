/* The exec path (DESIGN.md §3): clone(CLONE_VM|CLONE_VFORK) per command straight into a fresh
 * network namespace and a new PID namespace nested in the sandbox's (local mode needs a
 * short-lived helper for the nesting, see pidns_helper()), then the named steps of exec_child()
 * in spawn.c, in order, then execve of the exec's init (boxkite-init --exec), which runs the
 * command as its child. */
#ifndef BK_SPAWN_H
#define BK_SPAWN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"
#include "exec/cgroup.h"
#include "exec/child.h"
#include "exec/filter.h"

/* The sandbox's namespaces, opened once and cached (sandbox.c). */
typedef struct bk_sandbox_ns {
	int mnt, pid, ipc, uts;
	int net;          /* the sandbox's network namespace: the executor's, lo only (bk_sandbox_set_net) */
	bool pid_is_ours; /* pod mode: the sandbox's PID namespace is the executor's own */
} bk_sandbox_ns;

/* Everything prepared once at start-up. */
typedef struct bk_spawner {
	const bk_seccomp *seccomp;
	bk_child_creds creds;
	int init_fd;      /* boxkite-init, executed by descriptor as each exec's PID 1 */
	int userns;       /* the sandbox's user namespace (exec/userns.h), joined before the drop; -1: none */
	int self_pidns;   /* our own PID namespace, to restore pid_for_children after a clone */
	void *stack;      /* the one child stack: CLONE_VFORK keeps the parent off it until execve */
	size_t stack_size;
} bk_spawner;

typedef struct bk_spawn_limits {
	uint64_t fsize;
	uint64_t data;     /* RLIMIT_DATA; 0 = unlimited (a memory cgroup limits instead) */
	uint32_t nofile;
	uint32_t nproc;    /* RLIMIT_NPROC; 0 = leave it (a pids cgroup limits instead) */
} bk_spawn_limits;

typedef struct bk_spawn_request {
	char *const *argv; /* the command's; argv[0] without '/' is searched in envp's PATH */
	char *const *envp;
	const char *cwd_root; /* the sandbox root the working directory is under ("/workspace") */
	const char *cwd_rel;  /* the rest of it, relative ("." for the root itself) */
	bk_spawn_limits limits;
	const bk_sandbox_ns *ns;
	int netns;         /* a fresh network namespace from the pool (lo up), or -1: make one */
	/* A grant reaching a brokered destination: the egress proxy's CA bundle (read in the
	 * child, CLONE_VM), written to a read-only tmpfs on BK_EGRESS_CA_DIR in the exec's mount
	 * namespace. NULL: none. */
	const char *ca_bundle;
	size_t ca_len;
	const char *meminfo; /* the exec's /proc/meminfo (exec/meminfo.h), or NULL: the node's */
	bool tty;          /* a terminal for stdin, stdout and stderr instead of pipes */
	unsigned short rows, cols;
} bk_spawn_request;

typedef struct bk_spawned {
	int pidfd;        /* of the exec's init: PID 1 of its namespace */
	int stdin_w, stdout_r, stderr_r; /* tty: the terminal's master twice, and a pipe at EOF */
	int status_r;     /* the init's status pipe (init/init_status.h), non-blocking */
} bk_spawned;

/* Close what is still open of *s (taken descriptors are -1). */
void bk_spawned_close(bk_spawned *s);

/* SIGKILL the process of pidfd (an exec's init: its whole namespace goes) and reap it. */
void bk_pidfd_kill_reap(int pidfd);

/* init_path: the boxkite-init binary, opened once. */
int bk_spawner_init(bk_spawner *sp, const bk_seccomp *seccomp, const char *init_path, uid_t uid, gid_t gid,
		     bk_error **err);
void bk_spawner_fini(bk_spawner *sp);

/* Start one command, in the cgroup(s) the calling process is in (bk_cgroups_take). Returns 0
 * with *out filled, or -errno with *err and nothing left behind (a child that was made has been
 * reaped): *report names the step of the child that failed, or is STEP_NONE when the parent
 * failed (a pipe, the clone) or the child sent no readable report. */
int bk_spawn(const bk_spawner *sp, const bk_spawn_request *rq, bk_spawned *out, struct bk_step_report *report,
	     bk_error **err);

#endif
