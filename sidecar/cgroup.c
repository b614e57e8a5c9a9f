#include "cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "cleanup.h"

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
	_cleanup_close_ int fd = -1;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, size - 1);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return 0;
}

/* The path of our cgroup in the hierarchy whose /proc/self/cgroup line matches: for v1 the
 * controller list contains `controller`, for v2 the line is "0::PATH". */
static char *own_cgroup(const char *self_cgroup, const char *controller)
{
	FILE *f = fopen(self_cgroup, "re");
	char line[4096];
	char *found = NULL;

	if (!f)
		return NULL;
	while (!found && fgets(line, sizeof(line), f)) {
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		*c2 = '\0';
		line[strcspn(line, "\n")] = '\0';
		c2[1 + strcspn(c2 + 1, "\n")] = '\0';
		if (!controller) {
			if (strcmp(line, "0") == 0 && c1[1] == '\0')
				found = strdup(c2 + 1);
			continue;
		}
		for (char *tok = strtok(c1 + 1, ","); tok; tok = strtok(NULL, ","))
			if (strcmp(tok, controller) == 0)
				found = strdup(c2 + 1);
	}
	fclose(f);
	return found;
}

/* mkdir <hierarchy><own>/boxkite-<pid>; returns the malloc'd path. */
static char *make_parent(const char *hierarchy, const char *own, int *errnum)
{
	char *path = NULL;

	if (asprintf(&path, "%s%s%sboxkite-%d", hierarchy, own, own[strlen(own) - 1] == '/' ? "" : "/",
		     (int)getpid()) < 0) {
		*errnum = ENOMEM;
		return NULL;
	}
	if (mkdir(path, 0755) < 0 && errno != EEXIST) {
		*errnum = errno;
		free(path);
		return NULL;
	}
	return path;
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

	free(cg->base[0]);
	free(cg->base[1]);
	cg->base[0] = cg->base[1] = NULL;
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
	_cleanup_free_ char *rel = own_cgroup(self_cgroup, NULL);
	_cleanup_free_ char *own = NULL, *leaf = NULL;
	char controllers[1024], subtree[1024];
	int errnum = 0;

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
		if ((mkdir(leaf, 0755) < 0 && errno != EEXIST && (errnum = errno)) ||
		    (errnum = -move_processes(own, leaf)) ||
		    (errnum = -write_file(own, "cgroup.subtree_control", "+pids +memory")))
			return none(cg, "cannot delegate pids and memory below %s: %s", own, strerror(errnum));
	}
	cg->base[0] = make_parent(root, rel, &errnum);
	if (!cg->base[0])
		return none(cg, "cannot create a cgroup under %s: %s", own, strerror(errnum));
	errnum = -write_file(cg->base[0], "cgroup.subtree_control", "+pids +memory");
	if (errnum) {
		rmdir(cg->base[0]);
		return none(cg, "cannot enable pids and memory in %s: %s", cg->base[0], strerror(errnum));
	}
	cg->mode = BK_CGROUP_V2;
	return 0;
}

static int init_v1(bk_cgroups *cg, const char *root, const char *self_cgroup)
{
	static const char *const controllers[2] = { "pids", "memory" };

	for (int i = 0; i < 2; i++) {
		_cleanup_free_ char *own = own_cgroup(self_cgroup, controllers[i]);
		_cleanup_free_ char *hierarchy = NULL;
		int errnum = 0;

		if (!own)
			return none(cg, "no %s controller in %s", controllers[i], self_cgroup);
		if (asprintf(&hierarchy, "%s/%s", root, controllers[i]) < 0)
			return -ENOMEM;
		cg->base[i] = make_parent(hierarchy, own, &errnum);
		if (!cg->base[i]) {
			if (i == 1)
				rmdir(cg->base[0]);
			return none(cg, "cannot create a cgroup under %s: %s", hierarchy, strerror(errnum));
		}
	}
	cg->mode = BK_CGROUP_V1;
	return 0;
}

int bk_cgroups_init(bk_cgroups *cg, const char *root, const char *self_cgroup, bk_error **err)
{
	(void)err;
	memset(cg, 0, sizeof(*cg));
	if (is_cgroup2(root))
		return init_v2(cg, root, self_cgroup);
	return init_v1(cg, root, self_cgroup);
}

void bk_cgroups_fini(bk_cgroups *cg)
{
	for (int i = 0; i < 2; i++) {
		if (cg->base[i])
			rmdir(cg->base[i]);
		free(cg->base[i]);
	}
	free(cg->why_none);
	memset(cg, 0, sizeof(*cg));
}

int bk_exec_cgroup_create(const bk_cgroups *cg, uint64_t id, uint64_t memory_bytes, uint32_t pids,
			  bk_exec_cgroup *out, bk_error **err)
{
	int nh = cg->mode == BK_CGROUP_V1 ? 2 : cg->mode == BK_CGROUP_V2 ? 1 : 0;
	char value[32];
	int ret;

	memset(out, 0, sizeof(*out));
	out->procs_fd[0] = out->procs_fd[1] = out->dir_fd = -1;
	for (int i = 0; i < nh; i++) {
		if (asprintf(&out->path[i], "%s/exec-%" PRIu64, cg->base[i], id) < 0) {
			out->path[i] = NULL;
			ret = bk_error_errno(err, ENOMEM, "cgroup path");
			goto fail;
		}
		if (mkdir(out->path[i], 0755) < 0) {
			ret = bk_error_errno(err, errno, "mkdir %s", out->path[i]);
			free(out->path[i]);
			out->path[i] = NULL;
			goto fail;
		}
	}
	if (nh == 0)
		return 0;

	/* pids: v1 pids hierarchy [0], v2 [0]; memory: v1 memory hierarchy [1], v2 [0]. */
	const char *pids_dir = out->path[0], *mem_dir = out->path[nh - 1];
	snprintf(value, sizeof(value), "%u", pids);
	if ((ret = write_file(pids_dir, "pids.max", value)) < 0) {
		ret = bk_error_errno(err, -ret, "%s/pids.max", pids_dir);
		goto fail;
	}
	snprintf(value, sizeof(value), "%" PRIu64, memory_bytes);
	if ((ret = write_file(mem_dir, cg->mode == BK_CGROUP_V2 ? "memory.max" : "memory.limit_in_bytes", value)) <
	    0) {
		ret = bk_error_errno(err, -ret, "%s: memory limit", mem_dir);
		goto fail;
	}
	if (cg->mode == BK_CGROUP_V2) {
		/* No swap beyond the memory limit, so the limit is the limit (ignore if swap is off). */
		write_file(mem_dir, "memory.swap.max", "0");
		out->dir_fd = open(out->path[0], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (out->dir_fd < 0) {
			ret = bk_error_errno(err, errno, "open %s", out->path[0]);
			goto fail;
		}
		return 0;
	}
	for (int i = 0; i < 2; i++) {
		char path[4096];
		snprintf(path, sizeof(path), "%s/cgroup.procs", out->path[i]);
		out->procs_fd[i] = open(path, O_WRONLY | O_CLOEXEC);
		if (out->procs_fd[i] < 0) {
			ret = bk_error_errno(err, errno, "open %s", path);
			goto fail;
		}
	}
	return 0;
fail:
	bk_exec_cgroup_destroy(cg, out);
	return ret;
}

bool bk_exec_cgroup_oom_killed(const bk_cgroups *cg, const bk_exec_cgroup *ecg)
{
	const char *mem_dir = cg->mode == BK_CGROUP_V1 ? ecg->path[1] : ecg->path[0];
	char buf[1024];
	const char *p;

	if (cg->mode == BK_CGROUP_NONE || !mem_dir)
		return false;
	/* v2: memory.events "oom_kill N"; v1: memory.oom_control "oom_kill N" (kernel >= 4.13). */
	if (read_file(mem_dir, cg->mode == BK_CGROUP_V2 ? "memory.events" : "memory.oom_control", buf, sizeof(buf)) <
	    0)
		return false;
	p = strstr(buf, "oom_kill ");
	return p && strtoull(p + 9, NULL, 10) > 0;
}

void bk_exec_cgroup_close_fds(bk_exec_cgroup *ecg)
{
	ecg->procs_fd[0] = bk_close(ecg->procs_fd[0]);
	ecg->procs_fd[1] = bk_close(ecg->procs_fd[1]);
	ecg->dir_fd = bk_close(ecg->dir_fd);
}

void bk_exec_cgroup_destroy(const bk_cgroups *cg, bk_exec_cgroup *ecg)
{
	(void)cg;
	bk_exec_cgroup_close_fds(ecg);
	for (int i = 0; i < 2; i++) {
		if (ecg->path[i])
			rmdir(ecg->path[i]);
		free(ecg->path[i]);
		ecg->path[i] = NULL;
	}
}
