/* Per-exec cgroups (DESIGN.md §3 step 3): a pids and a memory limit for each exec, created
 * beneath the cgroup boxkited itself runs in (read from /proc/self/cgroup for each hierarchy),
 * never above it, and no process is ever moved out of the subtree it started in.
 *
 *   cgroup v2 (unified): <own>/boxkite-<pid>/exec-<id>; the exec child is created straight into
 *     it with clone3(CLONE_INTO_CGROUP), which costs nothing (notes/limits.md §3.5).
 *   cgroup v1: pids/<own>/boxkite-<pid>/exec-<id> and memory/<own>/boxkite-<pid>/exec-<id>;
 *     the child joins by writing "0" to each cgroup.procs through descriptors opened by the
 *     parent (the child no longer sees /sys once it is in the sandbox's mount namespace).
 *   none: no writable hierarchy with the pids and memory controllers; rlimits only (they are
 *     always set anyway), and the isolation profile says so. */
#ifndef BK_CGROUP_H
#define BK_CGROUP_H

#include <stdbool.h>
#include <stdint.h>

#include "error.h"

enum bk_cgroup_mode { BK_CGROUP_NONE, BK_CGROUP_V1, BK_CGROUP_V2 };

typedef struct bk_cgroups {
	enum bk_cgroup_mode mode;
	char *base[2];     /* v1: [0] pids, [1] memory; v2: [0] only */
	char *why_none;    /* mode NONE: what was missing, for the log and doctor */
} bk_cgroups;

/* One exec's cgroup(s). */
typedef struct bk_exec_cgroup {
	char *path[2];     /* as bk_cgroups.base */
	int procs_fd[2];   /* v1: cgroup.procs of each, for the child to join; else -1 */
	int dir_fd;        /* v2: the cgroup directory, for CLONE_INTO_CGROUP; else -1 */
} bk_exec_cgroup;

/* Find the hierarchies under `root` (normally /sys/fs/cgroup; tests pass a fake tree) and
 * `self_cgroup` (normally /proc/self/cgroup), create boxkite's parent cgroup(s), and decide the
 * mode. Never fails for lack of cgroups: mode NONE is a valid outcome. */
int bk_cgroups_init(bk_cgroups *cg, const char *root, const char *self_cgroup, bk_error **err);
void bk_cgroups_fini(bk_cgroups *cg); /* removes boxkite's parent cgroup(s) if empty */

/* Create the cgroup(s) of exec `id` with its limits. A no-op in mode NONE. */
int bk_exec_cgroup_create(const bk_cgroups *cg, uint64_t id, uint64_t memory_bytes, uint32_t pids,
			  bk_exec_cgroup *out, bk_error **err);

/* True if the kernel OOM-killed a process of this exec's memory cgroup. */
bool bk_exec_cgroup_oom_killed(const bk_cgroups *cg, const bk_exec_cgroup *ecg);

/* Close descriptors (after the child joined) — keeps the paths for the OOM check and removal. */
void bk_exec_cgroup_close_fds(bk_exec_cgroup *ecg);

/* Remove the exec's cgroup(s); its processes are gone by then. Frees the struct's contents. */
void bk_exec_cgroup_destroy(const bk_cgroups *cg, bk_exec_cgroup *ecg);

#endif
