#include "files/fileworker.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "channel.h"
#include "cleanup.h"
#include "clock.h"
#include "files/fsops.h"
#include "files/watcher.h"
#include "log.h"

struct worker {
	bk_channel ch;
	bk_fs fs;
	const bk_roots *roots;
	bk_watchers *watchers; /* FileWatch's (watcher.h) */
};

/* A file operation failed: the errno, the operation as the step, the sandbox path as message. */
static int reply_fs_error(struct worker *w, uint64_t id, const char *op, const bk_fs_error *e)
{
	return bk_answer_error(&w->ch, id, e->errnum, op, e->path);
}

static int reply_done(struct worker *w, uint64_t id, uint64_t count, bk_fs_info *info)
{
	bk_reply reply = BOXKITE__EXECUTOR__REPLY__INIT;
	Boxkite__Executor__Done done = BOXKITE__EXECUTOR__DONE__INIT;

	done.count = count;
	done.info = info;
	reply.id = id;
	reply.kind_case = BOXKITE__EXECUTOR__REPLY__KIND_DONE;
	reply.done = &done;
	return bk_answer(&w->ch, &reply, NULL, 0);
}

/* A quota walk gives up past this many entries. */
#define USAGE_ENTRIES_MAX 1000000

/* The most entries a List answers (bk_fs_list also bounds a page's bytes). */
#define LIST_PAGE_MAX 1000

static int check_stat(const bk_roots *roots, const bk_order *o, bk_error **err)
{
	return bk_order_check_path(roots, o->stat->path, err);
}

static int serve_stat(void *server, const bk_order *o, int *fds, size_t nfds)
{
	struct worker *w = server;
	bk_fs_info info = BOXKITE__EXECUTOR__FILE_INFO__INIT;
	bk_fs_error e = { 0 };
	char names[2 * 4096];

	(void)fds;
	(void)nfds;
	if (bk_fs_stat(&w->fs, o->stat->path, &info, names, &e) < 0)
		return reply_fs_error(w, o->id, "stat", &e);
	return reply_done(w, o->id, 0, &info);
}

static int check_list(const bk_roots *roots, const bk_order *o, bk_error **err)
{
	/* `after` is a name in the directory: one component. */
	if (strchr(o->list->after, '/') || strlen(o->list->after) > 255)
		return bk_error_invalid(err, "not a page token");
	return bk_order_check_path(roots, o->list->path, err);
}

static int serve_list(void *server, const bk_order *o, int *fds, size_t nfds)
{
	struct worker *w = server;
	bk_reply reply = BOXKITE__EXECUTOR__REPLY__INIT;
	Boxkite__Executor__Listed listed = BOXKITE__EXECUTOR__LISTED__INIT;
	_cleanup_free_ bk_fs_info **ptrs = NULL;
	_cleanup_free_ bk_fs_info *entries = NULL;
	bk_fs_error e = { 0 };
	struct timespec now;
	size_t n;
	bool more, read;
	uint32_t limit = o->list->limit && o->list->limit < LIST_PAGE_MAX ? o->list->limit : LIST_PAGE_MAX;

	(void)fds;
	(void)nfds;
	clock_gettime(CLOCK_REALTIME, &now);
	if (bk_fs_list(&w->fs, o->list->path, o->list->after, limit, &now, &entries, &n, &more, &read, &e) < 0)
		return reply_fs_error(w, o->id, "list", &e);
	ptrs = calloc(n + 1, sizeof(*ptrs));
	if (!ptrs)
		return bk_answer_error(&w->ch, o->id, ENOMEM, "list", o->list->path);
	for (size_t i = 0; i < n; i++)
		ptrs[i] = &entries[i];
	listed.n_entries = n;
	listed.entries = ptrs;
	listed.more = more;
	reply.id = o->id;
	reply.kind_case = BOXKITE__EXECUTOR__REPLY__KIND_LISTED;
	reply.listed = &listed;
	return bk_answer(&w->ch, &reply, NULL, 0);
}

static int check_open_read(const bk_roots *roots, const bk_order *o, bk_error **err)
{
	return bk_order_check_path(roots, o->open_read->path, err);
}

static int serve_open_read(void *server, const bk_order *o, int *fds, size_t nfds)
{
	struct worker *w = server;
	bk_fs_error e = { 0 };
	_cleanup_close_ int fd = bk_fs_open_read(&w->fs, o->open_read->path, &e);

	(void)fds;
	(void)nfds;
	return fd < 0 ? reply_fs_error(w, o->id, "open", &e) : bk_answer_opened(&w->ch, o->id, fd);
}

static int check_create_temp(const bk_roots *roots, const bk_order *o, bk_error **err)
{
	return bk_order_check_path(roots, o->create_temp->path, err);
}

static int serve_create_temp(void *server, const bk_order *o, int *fds, size_t nfds)
{
	struct worker *w = server;
	const Boxkite__Executor__CreateTemp *ct = o->create_temp;
	bk_fs_error e = { 0 };
	_cleanup_close_ int fd = bk_fs_create_temp(&w->fs, ct->path, ct->make_parents, ct->overwrite, &e);

	(void)fds;
	(void)nfds;
	return fd < 0 ? reply_fs_error(w, o->id, "create", &e) : bk_answer_opened(&w->ch, o->id, fd);
}

static int check_commit(const bk_roots *roots, const bk_order *o, bk_error **err)
{
	if (o->commit->mode > 0777)
		return bk_error_invalid(err, "mode: permission bits only");
	return bk_order_check_path(roots, o->commit->path, err);
}

/* Comes with the unnamed file to name. */
static int serve_commit(void *server, const bk_order *o, int *fds, size_t nfds)
{
	struct worker *w = server;
	bk_fs_error e = { 0 };

	(void)nfds;
	if (bk_fs_commit(&w->fs, fds[0], o->commit->path, o->commit->mode, o->commit->overwrite, &e) < 0)
		return reply_fs_error(w, o->id, "commit", &e);
	return reply_done(w, o->id, 1, NULL);
}

static int check_mkdir(const bk_roots *roots, const bk_order *o, bk_error **err)
{
	if (o->mkdir->mode > 0777)
		return bk_error_invalid(err, "mode: permission bits only");
	return bk_order_check_path(roots, o->mkdir->path, err);
}

static int serve_mkdir(void *server, const bk_order *o, int *fds, size_t nfds)
{
	struct worker *w = server;
	bk_fs_error e = { 0 };

	(void)fds;
	(void)nfds;
	if (bk_fs_mkdir(&w->fs, o->mkdir->path, o->mkdir->parents, o->mkdir->mode ? o->mkdir->mode : 0755, &e) < 0)
		return reply_fs_error(w, o->id, "mkdir", &e);
	return reply_done(w, o->id, 0, NULL);
}

static int check_symlink(const bk_roots *roots, const bk_order *o, bk_error **err)
{
	size_t len = strlen(o->symlink->target);

	/* Whether the target stays in the root is the operation's to check (bk_fs_symlink). */
	if (!len || len >= 4096)
		return bk_error_invalid(err, "not a symlink target");
	return bk_order_check_path(roots, o->symlink->path, err);
}

static int serve_symlink(void *server, const bk_order *o, int *fds, size_t nfds)
{
	struct worker *w = server;
	bk_fs_error e = { 0 };

	(void)fds;
	(void)nfds;
	if (bk_fs_symlink(&w->fs, o->symlink->path, o->symlink->target, &e) < 0)
		return reply_fs_error(w, o->id, "symlink", &e);
	return reply_done(w, o->id, 0, NULL);
}

static int check_remove(const bk_roots *roots, const bk_order *o, bk_error **err)
{
	return bk_order_check_path(roots, o->remove->path, err);
}

static int serve_remove(void *server, const bk_order *o, int *fds, size_t nfds)
{
	struct worker *w = server;
	bk_fs_error e = { 0 };
	uint64_t count = 0;

	(void)fds;
	(void)nfds;
	if (bk_fs_remove(&w->fs, o->remove->path, o->remove->recursive, &count, &e) < 0)
		return reply_fs_error(w, o->id, "remove", &e);
	return reply_done(w, o->id, count, NULL);
}

static int check_rename(const bk_roots *roots, const bk_order *o, bk_error **err)
{
	int ret = bk_order_check_path(roots, o->rename->from, err);

	return ret < 0 ? ret : bk_order_check_path(roots, o->rename->to, err);
}

static int serve_rename(void *server, const bk_order *o, int *fds, size_t nfds)
{
	struct worker *w = server;
	bk_fs_error e = { 0 };

	(void)fds;
	(void)nfds;
	if (bk_fs_rename(&w->fs, o->rename->from, o->rename->to, o->rename->overwrite, &e) < 0)
		return reply_fs_error(w, o->id, "rename", &e);
	return reply_done(w, o->id, 0, NULL);
}

static int check_usage(const bk_roots *roots, const bk_order *o, bk_error **err)
{
	return bk_order_check_path(roots, o->usage->path, err);
}

static int serve_usage(void *server, const bk_order *o, int *fds, size_t nfds)
{
	struct worker *w = server;
	bk_fs_error e = { 0 };
	uint64_t count = 0;

	(void)fds;
	(void)nfds;
	if (bk_fs_usage(&w->fs, o->usage->path, USAGE_ENTRIES_MAX, &count, &e) < 0)
		return reply_fs_error(w, o->id, "usage", &e);
	return reply_done(w, o->id, count, NULL);
}

static int check_watch(const bk_roots *roots, const bk_order *o, bk_error **err)
{
	if (!o->watch->watch)
		return bk_error_invalid(err, "watch 0");
	return bk_order_check_path(roots, o->watch->path, err);
}

static int serve_watch(void *server, const bk_order *o, int *fds, size_t nfds)
{
	struct worker *w = server;
	bk_fs_error e = { 0 };
	uint64_t dirs = 0;

	(void)fds;
	(void)nfds;
	if (bk_watchers_add(w->watchers, o->watch->watch, o->watch->path, &dirs, &e) < 0)
		return reply_fs_error(w, o->id, "watch", &e);
	return reply_done(w, o->id, dirs, NULL);
}

static int serve_unwatch(void *server, const bk_order *o, int *fds, size_t nfds)
{
	struct worker *w = server;

	(void)fds;
	(void)nfds;
	if (bk_watchers_remove(w->watchers, o->unwatch->watch) < 0)
		return bk_answer_error(&w->ch, o->id, ENOENT, "unwatch", "no such watch");
	return reply_done(w, o->id, 0, NULL);
}

static int serve_wipe(void *server, const bk_order *o, int *fds, size_t nfds)
{
	struct worker *w = server;
	bk_fs_error e = { 0 };
	uint64_t count = 0;

	(void)fds;
	(void)nfds;
	/* The last tenant's watches first (the front has forgotten them): nothing of the wipe is
	 * reported to anyone. */
	bk_watchers_clear(w->watchers);
	if (bk_fs_wipe(&w->fs, &count, &e) < 0)
		return reply_fs_error(w, o->id, "wipe", &e);
	return reply_done(w, o->id, count, NULL);
}

/* What a file worker serves. Every row is one file operation; a new one is one row more. */
static const bk_order_row fileworker_rows[] = {
	{ BOXKITE__EXECUTOR__ORDER__KIND_STAT, 0, check_stat, serve_stat },
	{ BOXKITE__EXECUTOR__ORDER__KIND_LIST, 0, check_list, serve_list },
	{ BOXKITE__EXECUTOR__ORDER__KIND_OPEN_READ, 0, check_open_read, serve_open_read },
	{ BOXKITE__EXECUTOR__ORDER__KIND_CREATE_TEMP, 0, check_create_temp, serve_create_temp },
	{ BOXKITE__EXECUTOR__ORDER__KIND_COMMIT, 1, check_commit, serve_commit },
	{ BOXKITE__EXECUTOR__ORDER__KIND_MKDIR, 0, check_mkdir, serve_mkdir },
	{ BOXKITE__EXECUTOR__ORDER__KIND_SYMLINK, 0, check_symlink, serve_symlink },
	{ BOXKITE__EXECUTOR__ORDER__KIND_REMOVE, 0, check_remove, serve_remove },
	{ BOXKITE__EXECUTOR__ORDER__KIND_RENAME, 0, check_rename, serve_rename },
	{ BOXKITE__EXECUTOR__ORDER__KIND_USAGE, 0, check_usage, serve_usage },
	{ BOXKITE__EXECUTOR__ORDER__KIND_WATCH, 0, check_watch, serve_watch },
	{ BOXKITE__EXECUTOR__ORDER__KIND_UNWATCH, 0, bk_order_check_none, serve_unwatch },
	{ BOXKITE__EXECUTOR__ORDER__KIND_WIPE, 0, bk_order_check_none, serve_wipe },
};

const bk_order_table bk_fileworker_orders = { fileworker_rows, BK_ARRAY_SIZE(fileworker_rows) };

/* --- the process ----------------------------------------------------------------------------- */

/* Serve until the front closes the channel (0) or it breaks (1): its orders, and the watches'
 * instances. */
static int serve(struct worker *w)
{
	for (;;) {
		struct pollfd pfd[1 + BK_WATCHES_MAX] = { { .fd = w->ch.fd, .events = (short)bk_orders_events(&w->ch) } };
		size_t n = 1 + bk_watchers_pollfds(w->watchers, pfd + 1);
		int ret;

		if (poll(pfd, n, bk_watchers_timeout(w->watchers, bk_clock_monotonic_ms())) < 0) {
			if (errno == EINTR)
				continue;
			return 1;
		}
		if ((pfd[0].revents & POLLOUT) && bk_channel_flush(&w->ch) < 0)
			return 1;
		if ((pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) && (pfd[0].events & POLLIN) &&
		    (ret = bk_orders_serve(&w->ch, &bk_fileworker_orders, w->roots, w)) < 0)
			return ret == -EPIPE ? 0 : 1;
		/* The watches' after the orders: a watch an Unwatch just ended is not read. */
		if (bk_watchers_serve(w->watchers, pfd + 1, n - 1, bk_clock_monotonic_ms()) < 0)
			return 1;
		if (bk_channel_broken(&w->ch))
			return 1;
	}
}

/* The worker's whole life, as a fork of the executor (single-threaded: ordinary calls are fine).
 * The steps in order, each with why; a failing one ends it, logged. */
__attribute__((noreturn)) static void worker_main(const bk_fileworker_config *cfg, int mnt_fd, int sock)
{
	struct worker w = { .roots = cfg->roots };
	const char *step;
	int proc_fd, root_fd, keep[BK_ROOTS_MAX + BK_FS_WIPE_EXTRA + 2];
	size_t nkeep = 0;
	bk_step failed;

	/* Nothing of the executor's outlives it. */
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	prctl(PR_SET_NAME, "bk-files", 0, 0, 0);
	/* Below boxkited in the CPU's eyes, as a command is (child.h): a listing of a huge directory
	 * is the sandbox's work, and the front's answers (Health) come first. */
	setpriority(PRIO_PROCESS, 0, BK_SANDBOX_NICE);
	/* Our own /proc/<pid>/fd, while /proc shows us: the sandbox's /proc may not (local mode: its
	 * PID namespace is not ours). A committed upload is named through it. */
	step = "open /proc/self/fd";
	if ((proc_fd = open("/proc/self/fd", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		goto fail;
	/* A network namespace with nothing in it: what runs here reaches no network, no abstract
	 * unix socket. */
	step = "unshare(net)";
	if (unshare(CLONE_NEWNET) < 0)
		goto fail;
	/* The sandbox's filesystem, exactly as its commands see it. */
	step = "setns(mnt)";
	if (setns(mnt_fd, CLONE_NEWNS) < 0 || chdir("/") < 0)
		goto fail;
	/* The sandbox's user namespace, as its commands join it (exec/userns.h): what the kernel
	 * counts per user — the watches' inotify instances and descriptors — counted as the
	 * sandbox's own, not as every sandbox's uid on the node. After the namespaces above, which
	 * needed the node's. */
	step = "setns(user)";
	if (cfg->userns >= 0 && setns(cfg->userns, CLONE_NEWUSER) < 0)
		goto fail;
	/* The sandbox user, no capability, no_new_privs, dying with the executor. */
	failed = bk_child_drop_privileges(cfg->creds);
	if (failed) {
		step = bk_step_name(failed);
		goto fail;
	}
	/* Not dumpable (after the uid change, which resets it): the sandbox's processes share our
	 * uid, and may neither ptrace us nor read our memory. */
	step = "PR_SET_DUMPABLE";
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		goto fail;
	/* The roots, opened as the sandbox user inside the sandbox's root. */
	step = "open /";
	if ((root_fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		goto fail;
	bk_fs_init(&w.fs, cfg->roots, cfg->creds->uid);
	bk_fs_attach(&w.fs, root_fd, proc_fd);
	bk_close(root_fd);
	/* Only what serving needs: the channel, the roots, /proc/self/fd (and stderr, the log). */
	keep[nkeep++] = sock;
	keep[nkeep++] = proc_fd;
	for (size_t i = 0; i < cfg->roots->n; i++)
		keep[nkeep++] = w.fs.root_fd[i];
	for (size_t i = 0; i < BK_FS_WIPE_EXTRA; i++)
		keep[nkeep++] = w.fs.wipe_fd[i];
	/* Our /proc/self/fd as the working directory: inotify_add_watch() takes only a path, and a
	 * directory we opened beneath a root is named there by its descriptor (watcher.c). */
	step = "fchdir(/proc/self/fd)";
	if (fchdir(proc_fd) < 0)
		goto fail;
	step = "close fds";
	if (bk_child_close_fds(keep, nkeep) < 0)
		goto fail;
	/* Its own filter, last: files, the channel, memory; nothing else exists. */
	step = "seccomp";
	if (bk_child_seccomp_program(cfg->filter) < 0)
		goto fail;
	if (bk_channel_init(&w.ch, sock, SIZE_MAX) < 0 || !(w.watchers = malloc(sizeof(*w.watchers))))
		_exit(1);
	bk_watchers_init(w.watchers, &w.fs, &w.ch);
	_exit(serve(&w));
fail:
	bk_log(BK_LOG_ERROR, "file worker: %s: %s", step, strerror(errno));
	_exit(1);
}

int bk_fileworker_start(const bk_fileworker_config *cfg, int mnt_fd, bk_fileworker *w, int *front_fd,
			bk_error **err)
{
	_cleanup_close_pair_ int sv[2] = BK_FD_PAIR_NONE;
	int pidfd = -1, ret;
	long pid;

	w->pid = 0;
	w->pidfd = -1;
	if ((ret = bk_channel_socketpair(sv)) < 0)
		return bk_error_errno(err, -ret, "the file worker's channel");
	pid = syscall(SYS_clone, CLONE_PIDFD | SIGCHLD, NULL, &pidfd, NULL, NULL);
	if (pid == 0) {
		bk_close(sv[0]);
		worker_main(cfg, mnt_fd, sv[1]);
	}
	if (pid < 0)
		return bk_error_errno(err, errno, "cannot fork the file worker");
	w->pid = (pid_t)pid;
	w->pidfd = pidfd;
	*front_fd = TAKE_FD(sv[0]);
	return 0;
}

int bk_fileworker_reap(bk_fileworker *w)
{
	int status = 0;

	if (w->pid <= 0)
		return 0;
	while (waitpid(w->pid, &status, 0) < 0 && errno == EINTR)
		;
	w->pid = 0;
	w->pidfd = bk_close(w->pidfd);
	return status;
}

void bk_fileworker_stop(bk_fileworker *w)
{
	if (w->pid <= 0)
		return;
	pidfd_send_signal(w->pidfd, SIGKILL, NULL, 0);
	bk_fileworker_reap(w);
}
