/* Where commands run: the sandbox's namespaces, found one of two ways, used the same way.
 *
 *   local (boxkited --local, the default): the executor creates the sandbox itself — new
 *     mount, PID, IPC and UTS namespaces; a root that shows what a container image would (the
 *     host's /usr, /etc and /bin, /lib* read-only, a fresh /proc, a minimal /dev, a tmpfs /tmp,
 *     the workspace, the sandbox user's home, a passwd and group naming it) and none of the
 *     host's state; boxkite-init as its PID 1, uid 1001, in a session without a terminal.
 *   pod (boxkited --pod): Kubernetes with shareProcessNamespace; the sandbox container's
 *     boxkite-init is found once by name, uid and a parent outside the PID namespace (only the
 *     container runtime starts such a process), pinned with a pidfd, watched, and found again
 *     after a container restart.
 * Either way the executor caches the namespace descriptors, and the exec path (spawn.c) and the
 * file worker (fileworker.c, which enters the mount namespace) never look at /proc/<pid> again.
 * The sandbox's network namespace is not the init's: the executor gives it one of its own
 * (bk_sandbox_set_net), in both modes. */
#ifndef BK_SANDBOX_H
#define BK_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "error.h"
#include "exec/spawn.h"

typedef struct bk_sandbox_config {
	bool pod;
	const char *workspace; /* local: host directory shown as /workspace */
	const char *home;      /* local: host directory shown as BK_SANDBOX_HOME */
	const char *init_path; /* local: the boxkite-init binary */
	size_t tmp_size;       /* local: size of the /tmp tmpfs */
	size_t shm_size;       /* local: size of the /dev/shm tmpfs */
	const char *init_name; /* pod: argv[0] basename of the sandbox's init */
	uid_t uid;
	gid_t gid;
} bk_sandbox_config;

typedef struct bk_sandbox {
	bk_sandbox_config cfg;
	bool ready;
	pid_t init_pid;
	int init_pidfd;
	bk_sandbox_ns ns;
	char why[256];        /* why it is not ready */
} bk_sandbox;

void bk_sandbox_init(bk_sandbox *sb, const bk_sandbox_config *cfg);

/* Make (local) or find (pod) the sandbox. Returns 0 when ready; in pod mode -EAGAIN while the
 * init is not (yet) there, with sb->why saying what was seen. */
int bk_sandbox_acquire(bk_sandbox *sb, const bk_spawner *sp, bk_error **err);

/* Make net (taken) the sandbox's network namespace: where a process that exposes a port runs
 * and the preview relay connects. One the executor made, never the pod's nor its init's, and a
 * fresh one at each Reset, so that nothing of one tenant's connections is the next one's to see. */
void bk_sandbox_set_net(bk_sandbox *sb, int net);

/* The init exited (its pidfd became readable): reap it if it is ours, drop the cached
 * namespaces. The caller acquires again. */
void bk_sandbox_lost(bk_sandbox *sb);

/* Pod mode, before serving: kill the exec inits a previous executor left in the pod's PID
 * namespace (boxkite-init --exec of the sandbox uid; at start-up none is ours), each with its
 * PID namespace. Their exec children die with the executor (PR_SET_PDEATHSIG); this is for what
 * outlived it anyway. How many, or -errno. Never in local mode: there our PID namespace is the
 * host's, and other boxkiteds' commands run as the same uid. */
int bk_sandbox_kill_orphans(const bk_sandbox *sb);

/* Kill a local sandbox (its PID namespace goes with its init) and close everything. */
void bk_sandbox_stop(bk_sandbox *sb);

#endif
