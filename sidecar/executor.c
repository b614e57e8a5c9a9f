/* The executor's order loop: one epoll over the channel to the front, the sandbox init's pidfd
 * and every live exec's pidfd. Single-threaded on purpose: the exec path clones with CLONE_VM,
 * and namespace, capability and seccomp work is only sound in a single-threaded process. */
#include "executor.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/epoll.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "boxkite/executor/order.pb-c.h"
#include "cgroup.h"
#include "channel.h"
#include "clock.h"
#include "envpolicy.h"
#include "files.h"
#include "keys.h"
#include "log.h"
#include "netns.h"
#include "sandbox.h"
#include "sbpath.h"
#include "filter.h"
#include "spawn.h"
#include "init/status.h"

typedef Boxkite__Executor__Order order_t;
typedef Boxkite__Executor__Reply reply_t;

/* How often a pod-mode executor looks for a sandbox init it has not found (yet). */
#define POD_RESCAN_MS 200
/* A local sandbox that failed to come up is retried this often. */
#define LOCAL_RETRY_MS 1000
/* Fresh network namespaces made ahead: enough for a burst of concurrent execs. */
#define NETNS_POOL_DEPTH 8

struct exec_entry {
	struct exec_entry *next;
	uint64_t id;
	int pidfd;
	int status_fd; /* the init's word on how its command ended (init/status.h) */
	bk_exec_cgroup cgroup;
};

struct executor {
	bk_channel ch;
	const bk_config *cfg;
	int epfd;
	bk_seccomp seccomp;
	bk_spawner spawner;
	bk_cgroups cgroups;
	bk_netns_pool netns;
	bk_sandbox sandbox;
	bk_fs fs;
	struct exec_entry *execs;
	char profile[160];
};

/* epoll tags that are not exec entries */
static char tag_channel, tag_sandbox;

static int reply_error(struct executor *ex, uint64_t id, int errnum, const char *step, const char *message);

/* A reply too big for one packet fails its order, not the channel. */
static int send_reply(struct executor *ex, reply_t *reply, const int *fds, size_t nfds)
{
	int ret = bk_channel_send(ex->ch.fd, &reply->base, fds, nfds);

	if (ret == -EMSGSIZE && reply->id)
		return reply_error(ex, reply->id, EMSGSIZE, "reply", "the answer is larger than the executor's channel takes");
	if (ret < 0)
		bk_log(BK_LOG_ERROR, "executor: cannot send to the front: %s", strerror(-ret));
	return ret;
}

/* An order failed at `step`; child_step is set when that was a step of a spawned child. */
static int reply_failure(struct executor *ex, uint64_t id, int errnum, bk_step child_step, const char *step,
			 const char *message)
{
	reply_t reply = BOXKITE__EXECUTOR__REPLY__INIT;

	reply.id = id;
	reply.errnum = errnum ? errnum : EIO;
	reply.child_step = child_step;
	reply.step = (char *)step;
	reply.message = (char *)message;
	return send_reply(ex, &reply, NULL, 0);
}

static int reply_error(struct executor *ex, uint64_t id, int errnum, const char *step, const char *message)
{
	return reply_failure(ex, id, errnum, BOXKITE__EXECUTOR__STEP__STEP_NONE, step, message);
}

/* Tell the front the sandbox's state (an event: Pong with id 0), on start and on each change. */
static int send_state(struct executor *ex, uint64_t id)
{
	reply_t reply = BOXKITE__EXECUTOR__REPLY__INIT;
	Boxkite__Executor__Pong pong = BOXKITE__EXECUTOR__PONG__INIT;

	pong.sandbox_ready = ex->sandbox.ready;
	pong.mode = ex->cfg->pod ? "pod" : "local";
	pong.isolation_profile = ex->profile;
	reply.id = id;
	reply.kind_case = BOXKITE__EXECUTOR__REPLY__KIND_PONG;
	reply.pong = &pong;
	if (!ex->sandbox.ready)
		reply.message = ex->sandbox.why;
	return send_reply(ex, &reply, NULL, 0);
}

static struct exec_entry *exec_find(struct executor *ex, uint64_t id)
{
	for (struct exec_entry *e = ex->execs; e; e = e->next)
		if (e->id == id)
			return e;
	return NULL;
}

/* --- SPAWN ----------------------------------------------------------------------------------- */

/* Wait in a fresh staged cgroup (sidecar/cgroup.h). A failure here is retried by the next take. */
static void cgroups_restage(struct executor *ex)
{
	bk_error *err = NULL;

	if (bk_cgroups_stage(&ex->cgroups, &err) < 0)
		bk_log(BK_LOG_ERROR, "executor: staging the next exec cgroup: %s", bk_error_msg(err));
	bk_error_free(err);
}

/* The order's fields, checked here whatever the front checked: an argv, a well-formed
 * environment, a cwd inside a sandbox root (*root: which; the child resolves the rest beneath
 * it as the sandbox user). The command runs unprivileged whatever its environment: any
 * well-formed variable is its own business. */
static const char *spawn_check(const bk_roots *roots, const Boxkite__Executor__Spawn *s, char *cwd, size_t cwdsz,
			       const bk_root **root)
{
	const char *why = NULL;

	if (s->exec_id == 0)
		return "exec id 0";
	if (s->n_argv == 0 || !s->argv[0][0])
		return "empty argv";
	for (size_t i = 0; i < s->n_env; i++) {
		const char *eq = strchr(s->env[i], '=');
		if (!eq || bk_env_name_valid(s->env[i], (size_t)(eq - s->env[i])) == false)
			return "malformed environment entry";
	}
	if (bk_sandbox_path(roots, s->cwd, cwd, cwdsz, root, &why) < 0)
		return why;
	return NULL;
}

static int order_spawn(struct executor *ex, uint64_t id, const Boxkite__Executor__Spawn *s)
{
	reply_t reply = BOXKITE__EXECUTOR__REPLY__INIT;
	Boxkite__Executor__Spawned spawned = BOXKITE__EXECUTOR__SPAWNED__INIT;
	struct bk_step_report report;
	struct exec_entry *e = NULL;
	bk_error *err = NULL;
	bk_spawned out;
	char cwd[4096], msg[512];
	const char *why, *cwd_rel;
	const bk_root *root = NULL;
	_cleanup_free_ char **argv = NULL, **envp = NULL;
	int ret;

	if (!ex->sandbox.ready)
		return reply_error(ex, id, EAGAIN, "sandbox", ex->sandbox.why);
	why = spawn_check(&ex->cfg->roots, s, cwd, sizeof(cwd), &root);
	if (why)
		return reply_error(ex, id, EINVAL, "order", why);
	if (exec_find(ex, s->exec_id))
		return reply_error(ex, id, EEXIST, "order", "exec id in use");

	argv = calloc(s->n_argv + 1, sizeof(*argv));
	envp = calloc(s->n_env + 1, sizeof(*envp));
	e = calloc(1, sizeof(*e));
	if (!argv || !envp || !e) {
		free(e);
		return reply_error(ex, id, ENOMEM, "order", "out of memory");
	}
	memcpy(argv, s->argv, s->n_argv * sizeof(*argv));
	memcpy(envp, s->env, s->n_env * sizeof(*envp));
	cwd_rel = cwd + strlen(root->path);
	cwd_rel = *cwd_rel == '/' ? cwd_rel + 1 : ".";

	e->id = s->exec_id;
	ret = bk_cgroups_take(&ex->cgroups, &e->cgroup, &err);
	if (ret < 0) {
		ret = reply_error(ex, id, -ret, "cgroup", bk_error_msg(err));
		bk_error_free(err);
		free(e);
		return ret;
	}
	bk_spawn_request rq = {
		.argv = argv,
		.envp = envp,
		.cwd_root = root->path,
		.cwd_rel = cwd_rel,
		.limits = {
			.fsize = ex->cfg->exec_fsize,
			.nofile = ex->cfg->exec_nofile,
			/* The pids cgroup is the real limit; RLIMIT_NPROC, which counts the sandbox uid's
			 * processes across the node, only where there is none. */
			.nproc = ex->cgroups.mode == BK_CGROUP_NONE ? ex->cfg->exec_nproc : 0,
			/* Without a memory cgroup, cap the data segment (heap and private mappings). */
			.data = ex->cgroups.mode == BK_CGROUP_NONE ? ex->cfg->exec_memory : 0,
		},
		.ns = &ex->sandbox.ns,
		.netns = bk_netns_pool_take(&ex->netns),
	};
	ret = bk_spawn(&ex->spawner, &rq, &out, &report, &err);
	/* The child holds the namespace now (or it was never entered): ours goes. */
	bk_close(rq.netns);
	if (ret != 0) {
		/* Out of the cgroup before it is removed. */
		cgroups_restage(ex);
		if (ret > 0) {
			snprintf(msg, sizeof(msg), "%s: %s", bk_step_name(report.step), strerror(report.errnum));
			ret = reply_failure(ex, id, report.errnum, report.step, bk_step_name(report.step), msg);
		} else {
			ret = reply_error(ex, id, -ret, "clone", bk_error_msg(err));
		}
		bk_error_free(err);
		bk_exec_cgroup_destroy(&ex->cgroups, &e->cgroup);
		free(e);
		return ret;
	}
	e->pidfd = out.pidfd;
	e->status_fd = out.status_r;
	e->next = ex->execs;
	ex->execs = e;
	epoll_ctl(ex->epfd, EPOLL_CTL_ADD, e->pidfd, &(struct epoll_event){ .events = EPOLLIN, .data.ptr = e });

	reply.id = id;
	reply.kind_case = BOXKITE__EXECUTOR__REPLY__KIND_SPAWNED;
	reply.spawned = &spawned;
	int fds[3] = { out.stdin_w, out.stdout_r, out.stderr_r };
	ret = send_reply(ex, &reply, fds, 3);
	for (int i = 0; i < 3; i++)
		bk_close(fds[i]);
	/* The answer is out: now, off its latency path, wait in the next exec's cgroup. */
	cgroups_restage(ex);
	return ret;
}

/* --- KILL and exits -------------------------------------------------------------------------- */

static int order_kill(struct executor *ex, uint64_t id, const Boxkite__Executor__Kill *k)
{
	reply_t reply = BOXKITE__EXECUTOR__REPLY__INIT;
	Boxkite__Executor__Killed killed = BOXKITE__EXECUTOR__KILLED__INIT;
	struct exec_entry *e = exec_find(ex, k->exec_id);
	int sig = k->signal ? k->signal : SIGKILL;

	if (sig < 1 || sig > 64)
		return reply_error(ex, id, EINVAL, "order", "bad signal");
	if (!e)
		return reply_error(ex, id, ESRCH, "kill", "no such exec (it exited)");
	if (pidfd_send_signal(e->pidfd, sig, NULL, 0) < 0 && errno != ESRCH)
		return reply_error(ex, id, errno, "kill", strerror(errno));
	reply.id = id;
	reply.kind_case = BOXKITE__EXECUTOR__REPLY__KIND_KILLED;
	reply.killed = &killed;
	return send_reply(ex, &reply, NULL, 0);
}

static void exec_remove(struct executor *ex, struct exec_entry *e)
{
	for (struct exec_entry **pp = &ex->execs; *pp; pp = &(*pp)->next) {
		if (*pp == e) {
			*pp = e->next;
			break;
		}
	}
	epoll_ctl(ex->epfd, EPOLL_CTL_DEL, e->pidfd, NULL);
	bk_close(e->pidfd);
	bk_close(e->status_fd);
	bk_exec_cgroup_destroy(&ex->cgroups, &e->cgroup);
	free(e);
}

/* The exec's init exited: its PID namespace, and so every process of the exec, is gone by the
 * time the kernel reports it. */
static int exec_exited(struct executor *ex, struct exec_entry *e)
{
	reply_t reply = BOXKITE__EXECUTOR__REPLY__INIT;
	Boxkite__Executor__Exited exited = BOXKITE__EXECUTOR__EXITED__INIT;
	siginfo_t info;

	struct bk_init_status st;

	memset(&info, 0, sizeof(info));
	if (waitid(P_PIDFD, (id_t)e->pidfd, &info, WEXITED | WNOHANG) < 0 || info.si_pid == 0)
		return 0; /* not yet: a spurious wake-up */
	exited.exec_id = e->id;
	/* The init's record of its command's end; without one (the init itself was killed: a
	 * timeout, the OOM killer), the init's own status. */
	if (read(e->status_fd, &st, sizeof(st)) == (ssize_t)sizeof(st) &&
	    (st.how == BK_INIT_EXITED || st.how == BK_INIT_SIGNALED)) {
		if (st.how == BK_INIT_EXITED)
			exited.exit_code = st.value;
		else
			exited.signal = st.value;
	} else if (info.si_code == CLD_EXITED) {
		exited.exit_code = info.si_status;
	} else {
		exited.signal = info.si_status;
	}
	/* Asked whatever the exit: the OOM killer may have taken any process of the exec's tree,
	 * not only its first. */
	exited.oom_killed = bk_exec_cgroup_oom_killed(&ex->cgroups, &e->cgroup);
	exec_remove(ex, e);
	reply.kind_case = BOXKITE__EXECUTOR__REPLY__KIND_EXITED;
	reply.exited = &exited;
	return send_reply(ex, &reply, NULL, 0);
}

static void kill_all_execs(struct executor *ex)
{
	for (struct exec_entry *e = ex->execs; e; e = e->next)
		pidfd_send_signal(e->pidfd, SIGKILL, NULL, 0);
}

/* --- the sandbox ----------------------------------------------------------------------------- */

static void sandbox_acquire(struct executor *ex)
{
	bk_error *err = NULL;
	bool was = ex->sandbox.ready;

	/* A local sandbox's init is our child: it must not start in an exec's cgroup. */
	if (!ex->cfg->pod && bk_cgroups_unstage(&ex->cgroups, &err) < 0) {
		bk_log(BK_LOG_ERROR, "executor: sandbox: %s", bk_error_msg(err));
		bk_error_free(err);
		return;
	}
	if (bk_sandbox_acquire(&ex->sandbox, &ex->spawner, &err) == 0) {
		epoll_ctl(ex->epfd, EPOLL_CTL_ADD, ex->sandbox.init_pidfd,
			  &(struct epoll_event){ .events = EPOLLIN, .data.ptr = &tag_sandbox });
		bk_fs_attach(&ex->fs, ex->sandbox.root_fd);
	}
	else if (err)
		bk_log(BK_LOG_ERROR, "executor: sandbox: %s", bk_error_msg(err));
	bk_error_free(err);
	cgroups_restage(ex);
	if (was != ex->sandbox.ready)
		send_state(ex, 0);
}

/* The sandbox's init exited (container restart, or a local sandbox killed): commands still
 * running there belong to a sandbox that is gone — kill them — then make or find it again. */
static void sandbox_lost(struct executor *ex)
{
	epoll_ctl(ex->epfd, EPOLL_CTL_DEL, ex->sandbox.init_pidfd, NULL);
	kill_all_execs(ex);
	bk_fs_detach(&ex->fs);
	bk_sandbox_lost(&ex->sandbox);
	send_state(ex, 0);
	sandbox_acquire(ex);
}

/* --- files ----------------------------------------------------------------------------------- */

/* A file operation failed: the errno, the operation as the step, the sandbox path as message. */
static int reply_fs_error(struct executor *ex, uint64_t id, const char *op, const bk_fs_error *e)
{
	return reply_error(ex, id, e->errnum, op, e->path);
}

static int reply_done(struct executor *ex, uint64_t id, uint64_t count, bk_fs_info *info, const int *fds,
		      size_t nfds)
{
	reply_t reply = BOXKITE__EXECUTOR__REPLY__INIT;
	Boxkite__Executor__Done done = BOXKITE__EXECUTOR__DONE__INIT;

	done.count = count;
	done.info = info;
	reply.id = id;
	reply.kind_case = BOXKITE__EXECUTOR__REPLY__KIND_DONE;
	reply.done = &done;
	return send_reply(ex, &reply, fds, nfds);
}

/* A quota walk gives up past this many entries. */
#define USAGE_ENTRIES_MAX 1000000

/* The most entries a List answers (bk_fs_list also bounds a page's bytes). */
#define LIST_PAGE_MAX 1000

static int order_file(struct executor *ex, const order_t *o, int *fds, size_t nfds)
{
	bk_fs_info info = BOXKITE__EXECUTOR__FILE_INFO__INIT;
	bk_fs_error e = { 0 };
	char names[2 * 4096];
	uint64_t count = 0;
	int fd, ret;

	if (!ex->sandbox.ready)
		return reply_error(ex, o->id, EAGAIN, "sandbox", ex->sandbox.why);
	switch (o->kind_case) {
	case BOXKITE__EXECUTOR__ORDER__KIND_STAT:
		if (bk_fs_stat(&ex->fs, o->stat->path, &info, names, &e) < 0)
			return reply_fs_error(ex, o->id, "stat", &e);
		return reply_done(ex, o->id, 0, &info, NULL, 0);
	case BOXKITE__EXECUTOR__ORDER__KIND_LIST: {
		reply_t reply = BOXKITE__EXECUTOR__REPLY__INIT;
		Boxkite__Executor__Listed listed = BOXKITE__EXECUTOR__LISTED__INIT;
		_cleanup_free_ bk_fs_info **ptrs = NULL;
		_cleanup_free_ bk_fs_info *entries = NULL;
		size_t n;
		bool more;
		uint32_t limit = o->list->limit && o->list->limit < LIST_PAGE_MAX ? o->list->limit : LIST_PAGE_MAX;

		if (bk_fs_list(&ex->fs, o->list->path, o->list->after, limit, &entries, &n, &more, &e) < 0)
			return reply_fs_error(ex, o->id, "list", &e);
		ptrs = calloc(n + 1, sizeof(*ptrs));
		if (!ptrs)
			return reply_error(ex, o->id, ENOMEM, "list", o->list->path);
		for (size_t i = 0; i < n; i++)
			ptrs[i] = &entries[i];
		listed.n_entries = n;
		listed.entries = ptrs;
		listed.more = more;
		reply.id = o->id;
		reply.kind_case = BOXKITE__EXECUTOR__REPLY__KIND_LISTED;
		reply.listed = &listed;
		return send_reply(ex, &reply, NULL, 0);
	}
	case BOXKITE__EXECUTOR__ORDER__KIND_OPEN_READ:
	case BOXKITE__EXECUTOR__ORDER__KIND_CREATE_TEMP: {
		reply_t reply = BOXKITE__EXECUTOR__REPLY__INIT;
		Boxkite__Executor__Opened opened = BOXKITE__EXECUTOR__OPENED__INIT;
		bool rd = o->kind_case == BOXKITE__EXECUTOR__ORDER__KIND_OPEN_READ;

		fd = rd ? bk_fs_open_read(&ex->fs, o->open_read->path, &e)
			: bk_fs_create_temp(&ex->fs, o->create_temp->path, o->create_temp->make_parents,
					    o->create_temp->overwrite, &e);
		if (fd < 0)
			return reply_fs_error(ex, o->id, rd ? "open" : "create", &e);
		reply.id = o->id;
		reply.kind_case = BOXKITE__EXECUTOR__REPLY__KIND_OPENED;
		reply.opened = &opened;
		ret = send_reply(ex, &reply, &fd, 1);
		bk_close(fd);
		return ret;
	}
	case BOXKITE__EXECUTOR__ORDER__KIND_COMMIT:
		if (nfds != 1)
			return reply_error(ex, o->id, EBADF, "commit", "no file attached");
		if (bk_fs_commit(&ex->fs, fds[0], o->commit->path, o->commit->mode, o->commit->overwrite, &e) < 0)
			return reply_fs_error(ex, o->id, "commit", &e);
		return reply_done(ex, o->id, 1, NULL, NULL, 0);
	case BOXKITE__EXECUTOR__ORDER__KIND_MKDIR:
		if (bk_fs_mkdir(&ex->fs, o->mkdir->path, o->mkdir->parents, o->mkdir->mode ? o->mkdir->mode : 0755, &e) < 0)
			return reply_fs_error(ex, o->id, "mkdir", &e);
		return reply_done(ex, o->id, 0, NULL, NULL, 0);
	case BOXKITE__EXECUTOR__ORDER__KIND_SYMLINK:
		if (bk_fs_symlink(&ex->fs, o->symlink->path, o->symlink->target, &e) < 0)
			return reply_fs_error(ex, o->id, "symlink", &e);
		return reply_done(ex, o->id, 0, NULL, NULL, 0);
	case BOXKITE__EXECUTOR__ORDER__KIND_REMOVE:
		if (bk_fs_remove(&ex->fs, o->remove->path, o->remove->recursive, &count, &e) < 0)
			return reply_fs_error(ex, o->id, "remove", &e);
		return reply_done(ex, o->id, count, NULL, NULL, 0);
	case BOXKITE__EXECUTOR__ORDER__KIND_USAGE:
		if (bk_fs_usage(&ex->fs, o->usage->path, USAGE_ENTRIES_MAX, &count, &e) < 0)
			return reply_fs_error(ex, o->id, "usage", &e);
		return reply_done(ex, o->id, count, NULL, NULL, 0);
	case BOXKITE__EXECUTOR__ORDER__KIND_RENAME:
		if (bk_fs_rename(&ex->fs, o->rename->from, o->rename->to, o->rename->overwrite, &e) < 0)
			return reply_fs_error(ex, o->id, "rename", &e);
		return reply_done(ex, o->id, 0, NULL, NULL, 0);
	default:
		return reply_error(ex, o->id, EINVAL, "order", "unknown order");
	}
}

/* --- orders ---------------------------------------------------------------------------------- */

/* The key file, opened for the front (which may not: it runs as its own user). The path is
 * boxkited's own configuration, never the front's word. */
static int order_key_file(struct executor *ex, uint64_t id)
{
	reply_t reply = BOXKITE__EXECUTOR__REPLY__INIT;
	Boxkite__Executor__Opened opened = BOXKITE__EXECUTOR__OPENED__INIT;
	_cleanup_close_ int fd = -1;

	if (!ex->cfg->key_file)
		return reply_error(ex, id, ENOENT, "key file", "boxkited has no --key-file");
	fd = bk_keyring_open(ex->cfg->key_file);
	if (fd < 0)
		return reply_error(ex, id, -fd, "open", ex->cfg->key_file);
	reply.id = id;
	reply.kind_case = BOXKITE__EXECUTOR__REPLY__KIND_OPENED;
	reply.opened = &opened;
	return send_reply(ex, &reply, &fd, 1);
}

/* Serve one order. Unknown kinds are refused: the executor does only what it knows. Only Commit
 * comes with a descriptor. */
static int serve(struct executor *ex, const order_t *order, int *fds, size_t nfds)
{
	switch (order->kind_case) {
	case BOXKITE__EXECUTOR__ORDER__KIND_PING:
		return send_state(ex, order->id);
	case BOXKITE__EXECUTOR__ORDER__KIND_SPAWN:
		return order_spawn(ex, order->id, order->spawn);
	case BOXKITE__EXECUTOR__ORDER__KIND_KILL:
		return order_kill(ex, order->id, order->kill);
	case BOXKITE__EXECUTOR__ORDER__KIND_OPEN_KEY_FILE:
		return order_key_file(ex, order->id);
	default:
		return order_file(ex, order, fds, nfds);
	}
}

/* Keep only the capabilities the executor's work needs; the bounding set goes with them so
 * nothing it ever execs could get more. */
static int drop_capabilities(void)
{
	static const int keep[] = {
		CAP_SYS_ADMIN,  /* namespaces, mounts, setns */
		CAP_SYS_CHROOT, /* setns into a mount namespace */
		CAP_SYS_PTRACE, /* open /proc/<pid>/ns of the sandbox's processes */
		CAP_SETUID, CAP_SETGID, CAP_SETPCAP, /* become the sandbox user, empty the bounding set */
		CAP_NET_ADMIN,  /* bring lo up in a new network namespace */
		CAP_KILL,       /* signal the sandbox user's processes */
		CAP_CHOWN,      /* local mode: give the workspace to the sandbox user */
	};
	uint64_t mask = 0, bounding = bk_capbset_read();

	for (size_t i = 0; i < BK_ARRAY_SIZE(keep); i++)
		mask |= BK_CAP(keep[i]);
	/* Only what we were given (a pod's list is exactly what its mode needs: deploy/); asking
	 * capset for more would fail and leave the set un-narrowed. */
	mask &= bounding;
	return bk_child_keep_caps(mask, bounding & ~mask) ? -1 : 0;
}

static int executor_setup(struct executor *ex, int sock)
{
	bk_error *err = NULL;
	bk_sandbox_config scfg = {
		.pod = ex->cfg->pod,
		.workspace = ex->cfg->workspace,
		.home = ex->cfg->home,
		.init_path = ex->cfg->init_path,
		.tmp_size = ex->cfg->tmp_size,
		.shm_size = ex->cfg->shm_size,
		.init_name = ex->cfg->init_name,
		.uid = ex->cfg->sandbox_uid,
		.gid = ex->cfg->sandbox_uid,
	};
	sigset_t none;
	int ret;

	/* The front blocked and ignored signals for itself: start from the defaults, but let only
	 * the front (channel EOF) end us — a terminal's SIGINT goes to both. */
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGINT, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	if (setgroups(0, NULL) < 0)
		bk_log(BK_LOG_ERROR, "executor: setgroups: %s", strerror(errno));
	/* Every mode the executor creates (directories made for the sandbox user, cgroups) is
	 * spelled out; the front's umask 077 must not narrow them. */
	umask(0);

	ex->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (ex->epfd < 0 || bk_channel_init(&ex->ch, sock) < 0)
		return -1;
	/* The cgroup helpers first: the remover keeps CAP_DAC_OVERRIDE, which the executor drops.
	 * Then the executor narrows itself, before it makes anything else, so that every process it
	 * makes later (the netns maker, the sandbox, each exec) starts from its narrow set — and the
	 * spawner reads the bounding set its children have to empty once, already final. */
	if ((ret = bk_seccomp_compile(&ex->seccomp, &err)) < 0 ||
	    (ret = bk_cgroups_init(&ex->cgroups, "/sys/fs/cgroup", "/proc/self/cgroup", ex->cfg->exec_memory,
				   ex->cfg->exec_pids, &err)) < 0) {
		bk_log(BK_LOG_ERROR, "executor: set-up: %s", bk_error_msg(err));
		bk_error_free(err);
		return -1;
	}
	if (drop_capabilities() < 0)
		bk_log(BK_LOG_ERROR, "executor: cannot narrow the executor's capabilities: %s", strerror(errno));
	if ((ret = bk_spawner_init(&ex->spawner, &ex->seccomp, ex->cfg->init_path, scfg.uid, scfg.gid, &err)) < 0) {
		bk_log(BK_LOG_ERROR, "executor: set-up: %s", bk_error_msg(err));
		bk_error_free(err);
		return -1;
	}
	if (ex->cgroups.mode == BK_CGROUP_NONE)
		bk_log(BK_LOG_ERROR, "executor: no per-exec cgroups (%s): limits are rlimits only", ex->cgroups.why_none);
	if (bk_netns_pool_start(&ex->netns, NETNS_POOL_DEPTH, &err) < 0) {
		bk_log(BK_LOG_ERROR, "executor: no netns pool (each exec makes its own): %s", bk_error_msg(err));
		bk_error_free(err);
		err = NULL;
	}
	snprintf(ex->profile, sizeof(ex->profile),
		 "bk1:netns-fresh,pidns-nested,uid-%u,caps-none,nnp,seccomp-%08x,cgroup-%s,rlimits", scfg.uid,
		 ex->seccomp.id,
		 ex->cgroups.mode == BK_CGROUP_V1 ? "v1" : ex->cgroups.mode == BK_CGROUP_V2 ? "v2" : "none");
	bk_sandbox_init(&ex->sandbox, &scfg);
	bk_fs_init(&ex->fs, &ex->cfg->roots, scfg.uid, scfg.gid);
	epoll_ctl(ex->epfd, EPOLL_CTL_ADD, ex->ch.fd, &(struct epoll_event){ .events = EPOLLIN, .data.ptr = &tag_channel });
	sandbox_acquire(ex);
	return 0;
}

static void executor_teardown(struct executor *ex)
{
	kill_all_execs(ex);
	while (ex->execs) {
		siginfo_t info;
		waitid(P_PIDFD, (id_t)ex->execs->pidfd, &info, WEXITED);
		exec_remove(ex, ex->execs);
	}
	bk_fs_detach(&ex->fs);
	bk_sandbox_stop(&ex->sandbox);
	bk_cgroups_fini(&ex->cgroups);
	bk_netns_pool_stop(&ex->netns);
	bk_spawner_fini(&ex->spawner);
	bk_seccomp_free(&ex->seccomp);
	bk_channel_fini(&ex->ch);
	bk_close(ex->epfd);
}

/* Read and serve every order waiting on the channel. <0 when the channel is gone. */
static int channel_ready(struct executor *ex)
{
	order_t *order = NULL;
	int fds[BK_CHANNEL_MAX_FDS];
	size_t nfds = 0;
	int ret = bk_channel_recv(&ex->ch, &boxkite__executor__order__descriptor, (ProtobufCMessage **)&order, fds,
				  &nfds);

	if (ret < 0)
		return ret;
	ret = serve(ex, order, fds, nfds);
	for (size_t i = 0; i < nfds; i++)
		bk_close(fds[i]);
	protobuf_c_message_free_unpacked(&order->base, NULL);
	return ret;
}

int bk_executor_main(int sock, const bk_config *cfg, pid_t front)
{
	struct executor ex = { .cfg = cfg, .epfd = -1 };
	int status = 0;

	/* Die with the front: nothing privileged outlives the process that talks to clients. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != front)
		return 1;
	ex.ch.fd = -1;
	ex.netns.sock = -1;
	if (executor_setup(&ex, sock) < 0) {
		executor_teardown(&ex);
		return 1;
	}
	int64_t retry_at = 0; /* when to look for (or rebuild) a sandbox that is not ready */
	for (;;) {
		struct epoll_event evs[16];
		int64_t now = bk_clock_monotonic_ms();
		int timeout = ex.sandbox.ready ? -1 : retry_at > now ? (int)(retry_at - now) : 0;
		int n = epoll_wait(ex.epfd, evs, 16, timeout);

		if (n < 0 && errno != EINTR) {
			status = 1;
			break;
		}
		/* On a deadline, not on idleness: orders arriving all the time (a client retrying its
		 * exec) must not keep a lost sandbox from being found again. */
		if (!ex.sandbox.ready && bk_clock_monotonic_ms() >= retry_at) {
			sandbox_acquire(&ex);
			retry_at = bk_clock_monotonic_ms() + (ex.cfg->pod ? POD_RESCAN_MS : LOCAL_RETRY_MS);
		}
		for (int i = 0; i < n; i++) {
			void *tag = evs[i].data.ptr;
			if (tag == &tag_channel) {
				int ret = channel_ready(&ex);
				/* EPIPE: the front closed the channel, shut down. Anything else is a
				 * broken channel, and the executor never guesses. */
				if (ret < 0) {
					status = ret == -EPIPE ? 0 : 1;
					goto out;
				}
			} else if (tag == &tag_sandbox) {
				sandbox_lost(&ex);
			} else {
				exec_exited(&ex, tag);
			}
		}
	}
out:
	executor_teardown(&ex);
	return status;
}
