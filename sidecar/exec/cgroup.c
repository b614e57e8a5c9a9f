#include "exec/cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <signal.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "exec/child.h"
#include "exec/kfile.h"

#define CGROUP2_SUPER_MAGIC 0x63677270

static int write_file(const char *dir, const char *name, const char *value)
{
	char path[4096];
	_cleanup_close_ int fd = -1;
	size_t len = strlen(value);

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (write(fd, value, len) != (ssize_t)len)
		return -errno ? -errno : -EIO;
	return 0;
}

static int read_file(const char *dir, const char *name, char *buf, size_t size)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return (int)bk_kfile_read(path, buf, size);
}

char *bk_cgroup_self_path(const char *self_cgroup, const char *controller)
{
	FILE *f = fopen(self_cgroup, "re");
	char line[4096];
	char *found = NULL;

	if (!f)
		return NULL;
	/* Lines are "ID:CONTROLLERS:PATH"; the path is the rest of the line, colons and all. */
	while (!found && fgets(line, sizeof(line), f)) {
		char *ctrls, *path, *save = NULL;

		line[strcspn(line, "\n")] = '\0';
		if (!(ctrls = strchr(line, ':')) || !(path = strchr(ctrls + 1, ':')))
			continue;
		*ctrls++ = '\0';
		*path++ = '\0';
		if (!controller) {
			if (strcmp(line, "0") == 0 && !ctrls[0])
				found = strdup(path);
			continue;
		}
		for (char *tok = strtok_r(ctrls, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
			if (strcmp(tok, controller) == 0)
				found = strdup(path);
	}
	fclose(f);
	return found;
}

/* rmdir every exec-* cgroup in base, then base: the ones still holding processes stay. */
static void remove_base(const char *base)
{
	DIR *d = opendir(base);
	struct dirent *de;
	char sub[4096 + 256];

	if (d) {
		while ((de = readdir(d)))
			if (strncmp(de->d_name, "exec-", 5) == 0) {
				snprintf(sub, sizeof(sub), "%s/%s", base, de->d_name);
				rmdir(sub);
			}
		closedir(d);
	}
	rmdir(base);
}

/* Remove boxkite-<pid> cgroups that a boxkited killed outright (SIGKILL) left behind: the ones
 * in `dir` whose pid runs no longer and that are over a minute old. The age matters because
 * the pid is looked up in our PID namespace only: a live boxkited in another namespace may look
 * dead from here — and then only its empty cgroups can go (rmdir refuses the others), and the
 * newest empty one, just staged for its next exec, is younger than a minute. */
static void remove_stale(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	time_t now = time(NULL);

	if (!d)
		return;
	while ((de = readdir(d))) {
		char path[4096];
		struct stat st;
		int pid;

		if (sscanf(de->d_name, "boxkite-%d", &pid) != 1 || pid <= 0 || kill(pid, 0) == 0 || errno != ESRCH)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (stat(path, &st) == 0 && now - st.st_ctime > 60)
			remove_base(path);
	}
	closedir(d);
}

/* mkdir <hierarchy><own>/boxkite-<pid>: 0 with the malloc'd path in *out, or -errno. */
static int make_parent(const char *hierarchy, const char *own, char **out)
{
	_cleanup_free_ char *path = NULL;

	if (asprintf(&path, "%s%s%sboxkite-%d", hierarchy, own, own[strlen(own) - 1] == '/' ? "" : "/",
		     (int)getpid()) < 0) {
		path = NULL;
		return -ENOMEM;
	}
	*strrchr(path, '/') = '\0';
	remove_stale(path);
	path[strlen(path)] = '/';
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return -errno;
	*out = TAKE_PTR(path);
	return 0;
}

static bool is_cgroup2(const char *path)
{
	struct statfs sfs;

	return statfs(path, &sfs) == 0 && sfs.f_type == CGROUP2_SUPER_MAGIC;
}

/* Settle on no cgroups, saying why. Returns 0: running without cgroups is not an error. */
static int none(bk_cgroups *cg, const char *fmt, ...) BK_PRINTF(2, 3);
static int none(bk_cgroups *cg, const char *fmt, ...)
{
	va_list ap;

	for (int i = 0; i < 2; i++) {
		free(cg->base[i]);
		free(cg->home[i]);
		cg->base[i] = cg->home[i] = NULL;
	}
	cg->mode = BK_CGROUP_NONE;
	va_start(ap, fmt);
	if (vasprintf(&cg->why_none, fmt, ap) < 0)
		cg->why_none = NULL;
	va_end(ap);
	return 0;
}

/* Move every process of cgroup `from` into `to` (both v2 directories). */
static int move_processes(const char *from, const char *to)
{
	char procs[8192], *line, *save = NULL;
	int ret;

	if ((ret = read_file(from, "cgroup.procs", procs, sizeof(procs))) < 0)
		return ret;
	for (line = strtok_r(procs, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		if ((ret = write_file(to, "cgroup.procs", line)) < 0 && ret != -ESRCH)
			return ret;
	return 0;
}

/* cgroup v2: controllers can be enabled for children only in a cgroup without processes of its
 * own ("no internal processes"). If ours holds processes (boxkited's) and does not delegate
 * pids and memory yet, our processes move into a leaf child of our own cgroup — deeper in the
 * subtree we started in, never out of it — and our cgroup then enables both for its children.
 * boxkite's parent cgroup is another child, with exec cgroups below it. */
static int init_v2(bk_cgroups *cg, const char *root, const char *self_cgroup)
{
	_cleanup_free_ char *rel = bk_cgroup_self_path(self_cgroup, NULL);
	_cleanup_free_ char *own = NULL, *leaf = NULL;
	char controllers[1024], subtree[1024];
	int ret = 0;

	if (!rel)
		return none(cg, "no cgroup v2 line in %s", self_cgroup);
	if (asprintf(&own, "%s%s", root, strcmp(rel, "/") ? rel : "") < 0)
		return -ENOMEM;
	if (read_file(own, "cgroup.controllers", controllers, sizeof(controllers)) < 0 ||
	    !strstr(controllers, "pids") || !strstr(controllers, "memory"))
		return none(cg, "cgroup v2 at %s lacks the pids or memory controller", own);
	if (read_file(own, "cgroup.subtree_control", subtree, sizeof(subtree)) < 0)
		return none(cg, "cannot read %s/cgroup.subtree_control", own);
	if (!strstr(subtree, "pids") || !strstr(subtree, "memory")) {
		if (asprintf(&leaf, "%s/boxkited", own) < 0)
			return -ENOMEM;
		if ((mkdir(leaf, 0755) < 0 && errno != EEXIST && (ret = -errno)) ||
		    (ret = move_processes(own, leaf)) < 0 ||
		    (ret = write_file(own, "cgroup.subtree_control", "+pids +memory")) < 0)
			return none(cg, "cannot delegate pids and memory below %s: %s", own, strerror(-ret));
		cg->home[0] = TAKE_PTR(leaf);
	} else {
		cg->home[0] = TAKE_PTR(own);
	}
	if ((ret = make_parent(root, rel, &cg->base[0])) < 0)
		return none(cg, "cannot create a cgroup under %s%s: %s", root, rel, strerror(-ret));
	if ((ret = write_file(cg->base[0], "cgroup.subtree_control", "+pids +memory")) < 0) {
		rmdir(cg->base[0]);
		return none(cg, "cannot enable pids and memory in %s: %s", cg->base[0], strerror(-ret));
	}
	/* No swap beyond the memory limit, so the limit is the limit: once, here, for every exec
	 * cgroup below (the limit is hierarchical; the file is absent without swap). */
	write_file(cg->base[0], "memory.swap.max", "0");
	cg->mode = BK_CGROUP_V2;
	return 0;
}

static int init_v1(bk_cgroups *cg, const char *root, const char *self_cgroup)
{
	static const char *const controllers[2] = { "pids", "memory" };

	for (int i = 0; i < 2; i++) {
		_cleanup_free_ char *own = bk_cgroup_self_path(self_cgroup, controllers[i]);
		_cleanup_free_ char *hierarchy = NULL;
		int ret;

		if (!own)
			return none(cg, "no %s controller in %s", controllers[i], self_cgroup);
		if (asprintf(&hierarchy, "%s/%s", root, controllers[i]) < 0 ||
		    asprintf(&cg->home[i], "%s%s", hierarchy, strcmp(own, "/") ? own : "") < 0)
			return -ENOMEM;
		if ((ret = make_parent(hierarchy, own, &cg->base[i])) < 0) {
			if (i == 1)
				rmdir(cg->base[0]);
			return none(cg, "cannot create a cgroup under %s: %s", hierarchy, strerror(-ret));
		}
	}
	cg->mode = BK_CGROUP_V1;
	return 0;
}


static int hierarchies(const bk_cgroups *cg)
{
	return cg->mode == BK_CGROUP_V1 ? 2 : cg->mode == BK_CGROUP_V2 ? 1 : 0;
}

/* Write limits to a cgroup (dirs as an exec's: pids in the pids hierarchy, [0]; memory in the
 * memory one, [1] on v1). */
static int set_limits(const bk_cgroups *cg, char *const *dirs, uint32_t pids, uint64_t memory, bk_error **err)
{
	const char *pids_dir = dirs[0], *mem_dir = dirs[hierarchies(cg) - 1];
	char value[32];
	int ret;

	snprintf(value, sizeof(value), "%u", pids);
	if ((ret = write_file(pids_dir, "pids.max", value)) < 0)
		return bk_error_errno(err, -ret, "%s/pids.max", pids_dir);
	snprintf(value, sizeof(value), "%" PRIu64, memory);
	if ((ret = write_file(mem_dir, cg->mode == BK_CGROUP_V2 ? "memory.max" : "memory.limit_in_bytes", value)) < 0)
		return bk_error_errno(err, -ret, "%s: memory limit", mem_dir);
	return 0;
}

/* Move the calling process into dirs[0..n). */
static int join(char *const *dirs, int n, bk_error **err)
{
	for (int i = 0; i < n; i++) {
		int ret = write_file(dirs[i], "cgroup.procs", "0");
		if (ret < 0)
			return bk_error_errno(err, -ret, "%s/cgroup.procs", dirs[i]);
	}
	return 0;
}

/* --- the mover ------------------------------------------------------------------------------- */

enum helper_op { HELPER_MOVE, HELPER_REMOVE };

struct helper_request {
	int32_t op;
	int32_t pid;
	int32_t n;
	char dir[2][1024];
};

/* Remove an exec's cgroup. It may still be busy for a moment: the executor waited in it for
 * the clone and leaves it only when the mover has moved it on, which can come after a short
 * command is already gone. Retried for up to half a second; off the latency path. */
static void remove_when_empty(const char *dir)
{
	for (int tries = 0; rmdir(dir) < 0 && errno == EBUSY && tries < 250; tries++)
		usleep(2000);
}

/* A helper's whole life: MOVE the pid asked into the cgroups asked and answer 0 or -errno, or
 * REMOVE the cgroups asked (no answer: nobody waits for a removal). */
__attribute__((noreturn)) static void helper_main(const bk_cgroups *cg, const char *name, int req, int ack,
						  uint64_t bounding)
{
	struct helper_request m;
	bool remover = ack < 0;

	prctl(PR_SET_NAME, name, 0, 0, 0);
	/* The mover dies with the executor. The remover outlives it on purpose: at the end of its
	 * queue (EOF: the executor exited, cleanly or not) it removes boxkite's cgroups. */
	if (!remover)
		prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	/* Moving and removing root-owned cgroups as uid 0 needs no capability — except removing
	 * boxkite's parent cgroup from a hierarchy root, which is mode 0555: the remover keeps
	 * CAP_DAC_OVERRIDE alone for that. Nothing in the bounding set: neither ever execs. */
	if (bk_child_keep_caps(remover ? BK_CAP(CAP_DAC_OVERRIDE) : 0, bounding))
		_exit(1);
	while (read(req, &m, sizeof(m)) == (ssize_t)sizeof(m)) {
		char pid[16];
		int32_t result = 0;

		snprintf(pid, sizeof(pid), "%d", m.pid);
		for (int i = 0; i < m.n && i < 2; i++) {
			m.dir[i][sizeof(m.dir[i]) - 1] = '\0';
			if (m.op == HELPER_REMOVE)
				remove_when_empty(m.dir[i]);
			else if (result == 0)
				result = write_file(m.dir[i], "cgroup.procs", pid);
		}
		if (m.op == HELPER_MOVE && write(ack, &result, sizeof(result)) != sizeof(result))
			break;
	}
	if (remover) {
		/* The executor's commands die with it (their parent-death signal); give the kernel a
		 * moment to empty their cgroups, then remove everything of ours. */
		for (int tries = 0; tries < 20; tries++) {
			bool left = false;
			for (int i = 0; i < 2; i++) {
				if (!cg->base[i])
					continue;
				remove_base(cg->base[i]);
				left |= access(cg->base[i], F_OK) == 0;
			}
			if (!left)
				break;
			usleep(100000);
		}
	}
	_exit(0);
}

/* Fork a helper: 0 with its pid, *req the pipe to send it requests and *ack (if not NULL) the
 * one its answers come on; or -errno. */
static int helper_start(const bk_cgroups *cg, const char *name, pid_t *pid, int *req, int *ack)
{
	uint64_t bounding = bk_capbset_read();
	_cleanup_close_pair_ int r[2] = BK_FD_PAIR_NONE, a[2] = BK_FD_PAIR_NONE;

	if (pipe2(r, O_CLOEXEC) < 0 || (ack && pipe2(a, O_CLOEXEC) < 0))
		return -errno;
	*pid = fork();
	if (*pid == 0) {
		/* Only its own pipe ends: a copy of another helper's would keep that one from ever
		 * seeing EOF, and the executor's shutdown would wait for it forever. */
		if (bk_child_close_fds((const int[]){ r[0], a[1] }, 2) < 0)
			_exit(1);
		helper_main(cg, name, r[0], a[1], bounding);
	}
	if (*pid < 0)
		return -errno;
	*req = TAKE_FD(r[1]);
	if (ack)
		*ack = TAKE_FD(a[0]);
	return 0;
}

static void helper_stop(pid_t *pid, int *req, int *ack)
{
	if (*pid <= 0)
		return;
	/* EOF on its request pipe: it finishes what was asked and exits. */
	*req = bk_close(*req);
	if (ack)
		*ack = bk_close(*ack);
	waitpid(*pid, NULL, 0);
	*pid = 0;
}

/* Wait for the move in progress, if any: 0, or -errno it failed with. */
static int mover_wait(bk_cgroups *cg)
{
	int32_t result;

	if (!cg->moving)
		return 0;
	cg->moving = false;
	if (read(cg->mover_ack, &result, sizeof(result)) != sizeof(result))
		return -EPIPE;
	return result < 0 ? result : 0;
}

/* The number in a cgroup file holding one ("0\n"), or in one of its "KEY N" lines; UINT64_MAX
 * when it cannot be read. */
static uint64_t read_count(const char *dir, const char *name, const char *key)
{
	char buf[1024];
	const char *p = buf;

	if (read_file(dir, name, buf, sizeof(buf)) < 0)
		return UINT64_MAX;
	if (key) {
		size_t len = strlen(key);
		for (p = buf; (p = strstr(p, key)) && !((p == buf || p[-1] == '\n') && p[len] == ' '); p += len)
			;
		if (!p)
			return UINT64_MAX;
		p += len + 1;
	}
	return *p >= '0' && *p <= '9' ? strtoull(p, NULL, 10) : UINT64_MAX;
}

bool bk_exec_cgroup_oom_killed(const bk_cgroups *cg, const bk_exec_cgroup *ecg)
{
	const char *mem_dir = cg->mode == BK_CGROUP_NONE ? NULL : ecg->path[hierarchies(cg) - 1];
	uint64_t kills;

	if (!mem_dir)
		return false;
	/* v2: memory.events "oom_kill N"; v1: memory.oom_control "oom_kill N" (kernel >= 4.13). */
	kills = read_count(mem_dir, cg->mode == BK_CGROUP_V2 ? "memory.events" : "memory.oom_control", "oom_kill");
	return kills != UINT64_MAX && kills > 0;
}

/* "Reuse" (cgroup.h): empty, never OOM-killed in, at most BK_CGROUP_SPARE_CHARGE charged. */
static bool reusable(const bk_cgroups *cg, const bk_exec_cgroup *ecg)
{
	const char *mem_dir = ecg->path[hierarchies(cg) - 1];
	bool v2 = cg->mode == BK_CGROUP_V2;

	return ecg->path[0] && mem_dir && read_count(ecg->path[0], "pids.current", NULL) == 0 &&
	       read_count(mem_dir, v2 ? "memory.events" : "memory.oom_control", "oom_kill") == 0 &&
	       read_count(mem_dir, v2 ? "memory.current" : "memory.usage_in_bytes", NULL) <= BK_CGROUP_SPARE_CHARGE;
}

/* Remove an exec's cgroup(s) — asynchronously, by the remover; its processes are gone by then.
 * Frees the struct's contents. */
static void exec_cgroup_remove(bk_cgroups *cg, bk_exec_cgroup *ecg)
{
	struct helper_request m = { .op = HELPER_REMOVE };

	/* rmdir of a memory cgroup can take milliseconds: the remover does it, and the exec's
	 * answer does not wait. Without the helper (or if it is gone), here. */
	for (int i = 0; i < 2; i++)
		if (ecg->path[i])
			snprintf(m.dir[m.n++], sizeof(m.dir[0]), "%s", ecg->path[i]);
	if (m.n && (cg->remover <= 0 || write(cg->remover_req, &m, sizeof(m)) != (ssize_t)sizeof(m)))
		for (int i = 0; i < m.n; i++)
			rmdir(m.dir[i]);
	for (int i = 0; i < 2; i++) {
		free(ecg->path[i]);
		ecg->path[i] = NULL;
	}
}

int bk_cgroups_init(bk_cgroups *cg, const char *root, const char *self_cgroup, const bk_cgroup_limits *limits,
		    bk_error **err)
{
	int ret;

	memset(cg, 0, sizeof(*cg));
	cg->mover_req = cg->mover_ack = cg->remover_req = -1;
	cg->limits = *limits;
	ret = is_cgroup2(root) ? init_v2(cg, root, self_cgroup) : init_v1(cg, root, self_cgroup);
	if (ret < 0 || cg->mode == BK_CGROUP_NONE)
		return ret;
	/* The sandbox as a whole, on the parent of every exec's cgroup (v1's memory hierarchy counts
	 * children in their parent only with use_hierarchy, the default and on kernels since 6.x the
	 * only mode; asked for anyway, before any child exists). */
	if (cg->mode == BK_CGROUP_V1)
		write_file(cg->base[1], "memory.use_hierarchy", "1");
	if ((ret = set_limits(cg, cg->base, limits->sandbox_pids, limits->sandbox_memory, err)) < 0) {
		for (int i = 0; i < 2; i++)
			if (cg->base[i])
				rmdir(cg->base[i]);
		none(cg, "the sandbox's limits could not be set");
		return bk_error_prefix(err, ret, "the sandbox's limits");
	}
	/* Two helpers, so that a slow removal never holds up a move the next exec waits for. */
	if ((ret = helper_start(cg, "bk-cgroup-mover", &cg->mover, &cg->mover_req, &cg->mover_ack)) < 0 ||
	    (ret = helper_start(cg, "bk-cgroup-rm", &cg->remover, &cg->remover_req, NULL)) < 0) {
		helper_stop(&cg->mover, &cg->mover_req, &cg->mover_ack);
		for (int i = 0; i < 2; i++)
			if (cg->base[i])
				rmdir(cg->base[i]);
		return bk_error_errno(err, -ret, "cannot start the cgroup helpers");
	}
	return 0;
}

void bk_cgroups_fini(bk_cgroups *cg)
{
	bk_cgroups_unstage(cg, NULL);
	bk_cgroups_drop_spares(cg);
	helper_stop(&cg->mover, &cg->mover_req, &cg->mover_ack);
	/* The remover empties its queue, then removes boxkite's cgroups, and exits. */
	helper_stop(&cg->remover, &cg->remover_req, NULL);
	for (int i = 0; i < 2; i++) {
		free(cg->base[i]);
		free(cg->home[i]);
	}
	free(cg->why_none);
	memset(cg, 0, sizeof(*cg));
}

int bk_cgroups_stage(bk_cgroups *cg, bk_error **err)
{
	struct helper_request m = { .op = HELPER_MOVE, .pid = getpid(), .n = hierarchies(cg) };
	int nh = hierarchies(cg), ret;

	if (nh == 0 || cg->staged)
		return 0;
	memset(&cg->stage, 0, sizeof(cg->stage));
	/* The cgroups of execs that ended: the executor is in none of them now (it is in the one it
	 * took last), so their emptiness says what it seems to. */
	while (cg->n_ended > 0) {
		bk_exec_cgroup *e = &cg->ended[--cg->n_ended];
		if (cg->n_spare < BK_CGROUP_SPARES && reusable(cg, e)) {
			cg->spare[cg->n_spare++] = *e;
			memset(e, 0, sizeof(*e));
		} else {
			exec_cgroup_remove(cg, e);
		}
	}
	if (cg->n_spare > 0) {
		/* A finished exec's, checked when it was kept: its limits are still written. */
		cg->stage = cg->spare[--cg->n_spare];
		memset(&cg->spare[cg->n_spare], 0, sizeof(cg->spare[0]));
		goto move;
	}
	for (int i = 0; i < nh; i++) {
		if (asprintf(&cg->stage.path[i], "%s/exec-%" PRIu64, cg->base[i], cg->next) < 0) {
			cg->stage.path[i] = NULL;
			ret = bk_error_errno(err, ENOMEM, "cgroup path");
			goto fail;
		}
		if (mkdir(cg->stage.path[i], 0755) < 0) {
			ret = bk_error_errno(err, errno, "mkdir %s", cg->stage.path[i]);
			free(cg->stage.path[i]);
			cg->stage.path[i] = NULL;
			goto fail;
		}
	}
	cg->next++;
	if ((ret = set_limits(cg, cg->stage.path, cg->limits.exec_pids, cg->limits.exec_memory, err)) < 0)
		goto fail;
move:
	/* The move goes to the mover: we go on serving while the kernel takes its time. */
	for (int i = 0; i < nh; i++)
		snprintf(m.dir[i], sizeof(m.dir[i]), "%s", cg->stage.path[i]);
	if (write(cg->mover_req, &m, sizeof(m)) != (ssize_t)sizeof(m)) {
		ret = bk_error_errno(err, errno ? errno : EPIPE, "the cgroup mover");
		goto fail;
	}
	cg->moving = true;
	cg->staged = true;
	return 0;
fail:
	exec_cgroup_remove(cg, &cg->stage);
	return ret;
}

int bk_cgroups_take(bk_cgroups *cg, bk_exec_cgroup *out, bk_error **err)
{
	int ret;

	memset(out, 0, sizeof(*out));
	if (hierarchies(cg) == 0)
		return 0;
	if (!cg->staged && (ret = bk_cgroups_stage(cg, err)) < 0)
		return ret;
	/* The child must be created in the staged cgroup: the move has to be done. */
	if ((ret = mover_wait(cg)) < 0) {
		join(cg->home, hierarchies(cg), NULL);
		exec_cgroup_remove(cg, &cg->stage);
		cg->staged = false;
		return bk_error_errno(err, -ret, "moving into %s", cg->stage.path[0] ? cg->stage.path[0] : "a cgroup");
	}
	/* The caller clones into it next; from then on it is that exec's. */
	*out = cg->stage;
	memset(&cg->stage, 0, sizeof(cg->stage));
	cg->staged = false;
	return 0;
}

int bk_cgroups_unstage(bk_cgroups *cg, bk_error **err)
{
	int ret;

	if (!cg->staged)
		return 0;
	mover_wait(cg);
	if ((ret = join(cg->home, hierarchies(cg), err)) < 0)
		return ret;
	exec_cgroup_remove(cg, &cg->stage);
	cg->staged = false;
	return 0;
}

int bk_cgroups_exec_memory(const bk_cgroups *cg, uint64_t *total, uint64_t *available)
{
	const char *mem_dir;
	uint64_t used, room;
	char buf[64];
	int ret;

	if (hierarchies(cg) == 0 || !(mem_dir = cg->base[hierarchies(cg) - 1]))
		return -ENOENT;
	if ((ret = read_file(mem_dir, cg->mode == BK_CGROUP_V2 ? "memory.current" : "memory.usage_in_bytes", buf,
			     sizeof(buf))) < 0)
		return ret;
	used = strtoull(buf, NULL, 10);
	room = used < cg->limits.sandbox_memory ? cg->limits.sandbox_memory - used : 0;
	*total = cg->limits.exec_memory < cg->limits.sandbox_memory ? cg->limits.exec_memory : cg->limits.sandbox_memory;
	*available = room < *total ? room : *total;
	return 0;
}

void bk_exec_cgroup_release(bk_cgroups *cg, bk_exec_cgroup *ecg)
{
	if (hierarchies(cg) > 0 && ecg->path[0] && cg->n_ended < BK_CGROUP_SPARES) {
		cg->ended[cg->n_ended++] = *ecg;
		memset(ecg, 0, sizeof(*ecg));
		return;
	}
	exec_cgroup_remove(cg, ecg);
}

void bk_cgroups_drop_spares(bk_cgroups *cg)
{
	while (cg->n_ended > 0)
		exec_cgroup_remove(cg, &cg->ended[--cg->n_ended]);
	while (cg->n_spare > 0)
		exec_cgroup_remove(cg, &cg->spare[--cg->n_spare]);
}
