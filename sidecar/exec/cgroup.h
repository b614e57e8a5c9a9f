/* Per-exec cgroups (DESIGN.md §3 step 3): a pids and a memory limit for each exec, created
 * beneath the cgroup boxkited itself runs in (read from /proc/self/cgroup for each hierarchy),
 * never above it, and no process is ever moved out of the subtree it started in.
 *
 *   cgroup v2 (unified): <own>/boxkite-<pid>/exec-<n>.
 *   cgroup v1: pids/<own>/boxkite-<pid>/exec-<n> and memory/<own>/boxkite-<pid>/exec-<n>.
 *   boxkite-<pid> holds the sandbox-wide limits, exec-<n> each exec's.
 *   none: no writable hierarchy with the pids and memory controllers; rlimits only (they are
 *     always set anyway), and the isolation profile says so.
 *
 * Staging. Moving a process between cgroups takes a global rwsem whose write side waits for an
 * RCU grace period once the system has been idle: 4-25 ms per move here, against ~30 µs when
 * moves come back to back (notes/limits.md §3.5). So no exec child moves: the executor itself
 * waits, between execs, inside the *next* exec's cgroup ("staged"), and the child is created
 * there by clone. Right after answering a spawn the executor moves on into a fresh staged
 * cgroup — and the move itself is made by a small helper process ("the mover", forked at
 * start-up), so that the executor goes on serving (an exec's exit, the next order) while the
 * kernel waits; it only waits for the move when the next spawn needs the staged cgroup before
 * the move is done. A second helper ("the remover") removes finished exec cgroups, which can
 * take as long. Anything else the executor creates (a local sandbox's init) is made after
 * moving it back home.
 *
 * Reuse. Making and removing a cgroup costs more than the rest of the bookkeeping of an exec
 * (a memory cgroup's mkdir and rmdir, the limits written, the kernel's teardown after): an exec's
 * cgroup that is over is kept, up to BK_CGROUP_SPARES of them, and staged again for a later exec
 * with its limits as they are — but only when it is empty (no process: pids.current 0), the
 * OOM killer never struck in it, and what is still charged to it (kernel objects the exec left,
 * such as cached dentries) is at most BK_CGROUP_SPARE_CHARGE, so that the next exec starts with
 * its whole memory limit but that much. Any other is removed as before. The check waits for the
 * next staging: when an exec ends the executor may still be in its cgroup (the move on is the
 * mover's), but once the next staged cgroup has been taken it is in that one. */
#ifndef BK_CGROUP_H
#define BK_CGROUP_H

#include <stdbool.h>
#include <stdint.h>

#include "error.h"

enum bk_cgroup_mode { BK_CGROUP_NONE, BK_CGROUP_V1, BK_CGROUP_V2 };

/* Every exec's own limits (--exec-memory, --exec-pids), and what all of them together may hold
 * (--sandbox-memory, --sandbox-pids): the second pair is written on boxkite's parent cgroup, so
 * the kernel bounds the sandbox as a whole — three commands each under their own limit cannot
 * add up past it. */
typedef struct bk_cgroup_limits {
	uint64_t exec_memory, sandbox_memory;
	uint32_t exec_pids, sandbox_pids;
} bk_cgroup_limits;

/* One exec's cgroup(s). */
typedef struct bk_exec_cgroup {
	char *path[2];     /* v1: [0] pids, [1] memory; v2: [0] only */
} bk_exec_cgroup;

/* How many finished exec cgroups are kept for reuse, and what may still be charged to one. */
#define BK_CGROUP_SPARES 8
#define BK_CGROUP_SPARE_CHARGE (1u << 20)

typedef struct bk_cgroups {
	enum bk_cgroup_mode mode;
	char *base[2];     /* boxkite's parent cgroup in each hierarchy */
	char *home[2];     /* where the executor lives when not staged */
	char *why_none;    /* mode NONE: what was missing, for the log and doctor */
	bk_cgroup_limits limits;
	uint64_t next;     /* number of the next exec cgroup */
	bool staged;       /* `stage` exists and the executor is in it (or on its way: moving) */
	bool moving;       /* the mover has a move of ours in progress */
	int mover_req, mover_ack; /* pipes to and from the mover */
	pid_t mover;
	int remover_req;   /* pipe to the remover, which rmdirs finished exec cgroups */
	pid_t remover;
	bk_exec_cgroup stage;
	bk_exec_cgroup ended[BK_CGROUP_SPARES]; /* of execs that ended, not yet checked for reuse */
	bk_exec_cgroup spare[BK_CGROUP_SPARES]; /* checked: empty, uncharged; staged before a new one */
	int n_ended, n_spare;
} bk_cgroups;

/* Our cgroup's path in one hierarchy, from a /proc/<pid>/cgroup file: the v1 line whose
 * controllers include `controller`, or with controller NULL the v2 line ("0::PATH"). malloc'd;
 * NULL when there is no such line. */
char *bk_cgroup_self_path(const char *self_cgroup, const char *controller);

/* Find the hierarchies under `root` (normally /sys/fs/cgroup; tests pass a fake tree) and
 * `self_cgroup` (normally /proc/self/cgroup), create boxkite's parent cgroup(s) with the
 * sandbox's limits, and decide the mode; every exec cgroup gets the exec limits. Never fails for
 * lack of cgroups: mode NONE is a valid outcome. */
int bk_cgroups_init(bk_cgroups *cg, const char *root, const char *self_cgroup, const bk_cgroup_limits *limits,
		    bk_error **err);
void bk_cgroups_fini(bk_cgroups *cg); /* goes home, removes the staged and parent cgroups, stops the mover */

/* Create the next exec's cgroup(s) with the limits and move the calling process in. A no-op in
 * mode NONE or when already staged. */
int bk_cgroups_stage(bk_cgroups *cg, bk_error **err);

/* The staged cgroup, for the child the caller clones next; the caller stages again after the
 * clone. Stages first when nothing is staged. Empty in mode NONE. */
int bk_cgroups_take(bk_cgroups *cg, bk_exec_cgroup *out, bk_error **err);

/* Move the calling process back home (before it creates something that is not an exec). */
int bk_cgroups_unstage(bk_cgroups *cg, bk_error **err);

/* The memory the next exec may use: its limit, or what the whole sandbox may still hold
 * (--sandbox-memory less what every exec holds now) if that is less, in *total, and of it what is
 * free now in *available. -ENOENT in mode NONE (no memory cgroup limits it), else 0 or -errno. */
int bk_cgroups_exec_memory(const bk_cgroups *cg, uint64_t *total, uint64_t *available);

/* True if the kernel OOM-killed a process of this exec's memory cgroup. */
bool bk_exec_cgroup_oom_killed(const bk_cgroups *cg, const bk_exec_cgroup *ecg);

/* The exec is over (its processes are gone): keep its cgroup(s) for a later exec when they can
 * be reused ("Reuse" above), else remove them — asynchronously, by the remover. Frees or moves
 * the struct's contents. */
void bk_exec_cgroup_release(bk_cgroups *cg, bk_exec_cgroup *ecg);

/* Remove every kept cgroup (Reset: nothing of the last tenant's execs is handed to the next's). */
void bk_cgroups_drop_spares(bk_cgroups *cg);

#endif
