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
#include <netinet/in.h>
#include <sys/socket.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "boxkite/executor/order.pb-c.h"
#include "channel.h"
#include "clock.h"
#include "egresspolicy.h"
#include "envpolicy.h"
#include "exec/cgroup.h"
#include "exec/filter.h"
#include "exec/init/init_status.h"
#include "exec/meminfo.h"
#include "exec/netns.h"
#include "exec/proxyctl.h"
#include "exec/sandbox.h"
#include "exec/spawn.h"
#include "exec/userns.h"
#include "files/fileworker.h"
#include "keys.h"
#include "log.h"
#include "orders.h"
#include "sbpath.h"

typedef Boxkite__Executor__Reply reply_t;

/* How often a pod-mode executor looks for a sandbox init it has not found (yet). */
#define POD_RESCAN_MS 200
/* A local sandbox that failed to come up is retried this often. */
#define LOCAL_RETRY_MS 1000
/* Fresh network namespaces made ahead: enough for a burst of concurrent execs. */
#define NETNS_POOL_DEPTH 8
/* A file worker that died is started again, at most this often. */
#define FILES_RETRY_MS 1000
/* The egress proxy's first start answers within this, or boxkited does not start. */
#define EGRESS_START_MS 10000

struct exec_entry {
	struct exec_entry *next;
	uint64_t id;
	int pidfd;
	int status_fd; /* the init's word on how its command ended (init/init_status.h) */
	bk_exec_cgroup cgroup;
	/* A granted exec: its listener (the proxy's copy may die with the proxy; this one is
	 * handed to the next), its grant and the key that asked, for that next proxy. -1: none. */
	int egress_listener;
	char **egress;
	size_t n_egress;
	char key_id[65];
};

struct executor {
	bk_channel ch;
	bk_order *configure;  /* the order Configure, kept: cfg points into it */
	const Boxkite__Executor__Configure *cfg;
	bk_roots roots;       /* cfg's */
	int epfd;
	int self_net;         /* our own network namespace, to come back to after a Connect */
	int userns;           /* the sandbox's user namespace, made before the drop, until the spawner takes it */
	uint32_t armed;     /* the events the channel is registered for */
	bk_seccomp seccomp;
	bk_spawner spawner;
	bk_cgroups cgroups;
	bk_netns_pool netns;
	bk_sandbox sandbox;
	struct sock_fprog files_filter;  /* the file worker's (filter.c) */
	bk_fileworker files;
	int64_t files_started_ms;        /* when the current (or last) worker was started */
	int64_t files_retry_at;          /* when to start one again, 0: none due */
	bk_proxyctl egress;              /* the egress proxy, when configured */
	uint32_t egress_armed;           /* the events its channel is registered for (0: none) */
	struct exec_entry *execs;
	/* The next exec, prepared ahead of its command (exec/spawn.h): its init waits for it. */
	struct {
		bool ready;
		bk_spawned s;
		bk_exec_cgroup cgroup;
	} warm;
	/* The sandbox's mount table (its init's mountinfo), watched for changes: an exec prepared
	 * ahead holds a copy made before them. -1: none. */
	int mounts_fd;
	/* Reset's KillAll: the order to answer once every exec is reaped (0: none), how many it
	 * killed, and whether Spawn is held off. */
	uint64_t kill_all_id;
	uint64_t kill_all_count;
	bool hold;
	char profile[160];
};

/* epoll tags that are not exec entries */
static char tag_channel, tag_sandbox, tag_files, tag_egress_pid, tag_egress_channel, tag_warm, tag_mounts;

/* Answers and events go out (or wait in the queue) without the executor ever waiting. */
static int send_reply(struct executor *ex, reply_t *reply, const int *fds, size_t nfds)
{
	return bk_answer(&ex->ch, reply, fds, nfds);
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
	return bk_answer_error(&ex->ch, id, errnum, step, message);
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

/* Wait in a fresh staged cgroup (sidecar/exec/cgroup.h). A failure here is retried by the next take. */
static void cgroups_restage(struct executor *ex)
{
	bk_error *err = NULL;

	if (bk_cgroups_stage(&ex->cgroups, &err) < 0)
		bk_log(BK_LOG_ERROR, "executor: staging the next exec cgroup: %s", bk_error_msg(err));
	bk_error_free(err);
}

/* The sandbox's network namespace made anew (sandbox.h, bk_sandbox_set_net). */
static int sandbox_net_renew(struct executor *ex)
{
	int net;

	if (!ex->sandbox.ready)
		return -EAGAIN;
	net = bk_netns_fresh(&ex->netns, ex->self_net);
	if (net < 0)
		return net;
	bk_sandbox_set_net(&ex->sandbox, net);
	return 0;
}

/* The order's fields, checked here whatever the front checked: an argv, a well-formed
 * environment, a cwd inside a sandbox root (the child resolves the rest beneath its root as
 * the sandbox user). The command runs unprivileged whatever its environment: any well-formed
 * variable is its own business. */
static int check_spawn(const bk_roots *roots, const bk_order *o, bk_error **err)
{
	const Boxkite__Executor__Spawn *s = o->spawn;

	if (s->exec_id == 0)
		return bk_error_invalid(err, "exec id 0");
	if (s->n_argv == 0 || !s->argv[0][0])
		return bk_error_invalid(err, "empty argv");
	for (size_t i = 0; i < s->n_env; i++) {
		const char *eq = strchr(s->env[i], '=');
		if (!eq || bk_env_name_valid(s->env[i], (size_t)(eq - s->env[i])) == false)
			return bk_error_invalid(err, "malformed environment entry");
	}
	if (s->tty ? s->rows == 0 || s->rows > 65535 || s->cols == 0 || s->cols > 65535 : s->rows || s->cols)
		return bk_error_invalid(err, "a terminal's size is 1-65535 rows and columns, and only a terminal has one");
	/* A grant: well-formed here, within the ceiling when served (bk_proxyctl_check). A process
	 * in the sandbox's network namespace shares the pod's network: no grant means anything
	 * there. */
	if (s->n_egress > BK_EGRESS_GRANT_MAX || strlen(s->key_id) > 64)
		return bk_error_invalid(err, "a grant of at most 64 patterns, a key id of at most 64 bytes");
	if (s->n_egress && s->sandbox_net)
		return bk_error_invalid(err, "a grant and the sandbox's network namespace");
	for (size_t i = 0; i < s->n_egress; i++) {
		bk_egress_pattern p;
		int ret = bk_egress_pattern_parse(s->egress[i], &p, err);
		if (ret < 0)
			return ret;
	}
	return bk_order_check_path(roots, s->cwd, err);
}

/* An exec entry and what it holds besides its process: its grant's copy and its listener. */
static void exec_entry_free(struct exec_entry *e)
{
	bk_close(e->egress_listener);
	for (size_t i = 0; i < e->n_egress; i++)
		free(e->egress[i]);
	free(e->egress);
	free(e);
}

/* A granted exec's network namespace, with the proxy's listener in it, and its grant kept for
 * a proxy started later. */
static int egress_prepare(struct executor *ex, const Boxkite__Executor__Spawn *s, struct exec_entry *e, int *netns,
			  bk_error **err)
{
	e->egress = calloc(s->n_egress, sizeof(*e->egress));
	if (!e->egress)
		return bk_error_errno(err, ENOMEM, "the grant");
	for (size_t i = 0; i < s->n_egress; i++, e->n_egress++)
		if (!(e->egress[i] = strdup(s->egress[i])))
			return bk_error_errno(err, ENOMEM, "the grant");
	snprintf(e->key_id, sizeof(e->key_id), "%s", s->key_id);
	*netns = bk_netns_pool_take(&ex->netns);
	return bk_proxyctl_listener(&ex->egress, ex->self_net, netns, &e->egress_listener, err);
}

/* The exec e did not start: the executor leaves its cgroup for a fresh one (sidecar/exec/
 * cgroup.h, "Staging"), e's goes, and the order failed at `step` (child_step: a step of the
 * child's). */
static int spawn_failed(struct executor *ex, struct exec_entry *e, uint64_t id, int errnum, bk_step child_step,
			const char *step, const char *message)
{
	cgroups_restage(ex);
	bk_exec_cgroup_release(&ex->cgroups, &e->cgroup);
	exec_entry_free(e);
	return reply_failure(ex, id, errnum, child_step, step, message);
}

/* The next exec's /proc/meminfo (exec/meminfo.h), in text: its memory limit where a memory
 * cgroup sets one; NULL, the node's, where none does — or where the sandbox's use cannot be read
 * (logged: the command still runs, under its limit, seeing the node's numbers). */
static const char *exec_meminfo(const struct executor *ex, char text[BK_MEMINFO_MAX])
{
	uint64_t total, available;
	int ret = bk_cgroups_exec_memory(&ex->cgroups, &total, &available);

	if (ret == -ENOENT)
		return NULL;
	if (ret < 0) {
		bk_log(BK_LOG_WARN, "an exec sees the node's /proc/meminfo: the sandbox's memory use: %s", strerror(-ret));
		return NULL;
	}
	bk_meminfo_text(total, available, text);
	return text;
}

/* What every exec is held to: the configuration's limits, the same for every command. */
static bk_spawn_limits exec_limits(const struct executor *ex)
{
	return (bk_spawn_limits){
		.fsize = ex->cfg->exec_fsize,
		.nofile = ex->cfg->exec_nofile,
		/* The pids cgroup is the real limit; RLIMIT_NPROC, which counts the sandbox uid's
		 * processes across the node, only where there is none. */
		.nproc = ex->cgroups.mode == BK_CGROUP_NONE ? ex->cfg->exec_nproc : 0,
		/* Without a memory cgroup, cap the data segment (heap and private mappings). */
		.data = ex->cgroups.mode == BK_CGROUP_NONE ? ex->cfg->exec_memory : 0,
	};
}

/* Whether the sandbox's mount table changed since this was last asked (or since it was first
 * watched): a mountinfo file polls POLLPRI once per change. */
static bool mounts_changed(struct executor *ex)
{
	struct pollfd p = { .fd = ex->mounts_fd, .events = POLLPRI };

	return ex->mounts_fd >= 0 && poll(&p, 1, 0) > 0 && (p.revents & (POLLPRI | POLLERR));
}

/* Watch the ready sandbox's mount table (its init's); without a watch nothing is prepared ahead. */
static void mounts_watch(struct executor *ex)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/mountinfo", (int)ex->sandbox.init_pid);
	ex->mounts_fd = open(path, O_RDONLY | O_CLOEXEC);
	if (ex->mounts_fd >= 0 &&
	    epoll_ctl(ex->epfd, EPOLL_CTL_ADD, ex->mounts_fd, &(struct epoll_event){ .events = EPOLLPRI, .data.ptr = &tag_mounts }) < 0)
		ex->mounts_fd = bk_close(ex->mounts_fd);
	if (ex->mounts_fd < 0)
		bk_log(BK_LOG_ERROR, "executor: cannot watch %s (%s): nothing is prepared ahead", path, strerror(errno));
}

static void mounts_unwatch(struct executor *ex)
{
	if (ex->mounts_fd >= 0)
		epoll_ctl(ex->epfd, EPOLL_CTL_DEL, ex->mounts_fd, NULL);
	ex->mounts_fd = bk_close(ex->mounts_fd);
}

/* The exec prepared ahead goes, if there is one: killed, reaped, its cgroup given back. */
static void warm_drop(struct executor *ex)
{
	if (!ex->warm.ready)
		return;
	ex->warm.ready = false;
	epoll_ctl(ex->epfd, EPOLL_CTL_DEL, ex->warm.s.pidfd, NULL);
	bk_pidfd_kill_reap(ex->warm.s.pidfd);
	bk_spawned_close(&ex->warm.s);
	bk_exec_cgroup_release(&ex->cgroups, &ex->warm.cgroup);
}

/* Prepare the next exec ahead of its command — every step of the exec path but the command's own
 * (exec/spawn.h): its cgroup, a fresh network namespace from the pool, its own PID, mount, IPC and
 * cgroup namespaces, /proc and devpts, the sandbox user, rlimits, seccomp — off the latency of the
 * Spawn that will use it. Only while the sandbox is there and no reset holds it; a failure is
 * logged, and the next Spawn takes the whole path and tries again after. */
static void warm_prepare(struct executor *ex)
{
	static char *const no_env[] = { NULL };
	char meminfo[BK_MEMINFO_MAX];
	bk_spawn_request rq = { .envp = no_env, .limits = exec_limits(ex), .ns = &ex->sandbox.ns, .warm = true };
	struct bk_step_report report;
	bk_error *err = NULL;
	int ret;

	if (ex->warm.ready || !ex->sandbox.ready || ex->hold || ex->mounts_fd < 0)
		return;
	/* Its /proc/meminfo says what the sandbox could give it now, when it is made. */
	rq.meminfo = exec_meminfo(ex, meminfo);
	/* What it is made with is the mount table of now. */
	(void)mounts_changed(ex);
	if ((ret = bk_cgroups_take(&ex->cgroups, &ex->warm.cgroup, &err)) == 0) {
		rq.netns = bk_netns_pool_take(&ex->netns);
		ret = bk_spawn(&ex->spawner, &rq, &ex->warm.s, &report, &err);
		bk_close(rq.netns);
		cgroups_restage(ex);
		if (ret == 0 && epoll_ctl(ex->epfd, EPOLL_CTL_ADD, ex->warm.s.pidfd,
					  &(struct epoll_event){ .events = EPOLLIN, .data.ptr = &tag_warm }) < 0) {
			ret = bk_error_errno(&err, errno, "cannot watch it");
			bk_pidfd_kill_reap(ex->warm.s.pidfd);
			bk_spawned_close(&ex->warm.s);
		}
		if (ret < 0)
			bk_exec_cgroup_release(&ex->cgroups, &ex->warm.cgroup);
	}
	if (ret < 0) {
		bk_log(BK_LOG_ERROR, "executor: preparing an exec ahead: %s", bk_error_msg(err));
		bk_error_free(err);
		return;
	}
	ex->warm.ready = true;
}

/* The Spawn of e on the exec prepared ahead: 0 or -1 as order_spawn's, once answered; 1 when the
 * prepared exec is gone (its init died) and the Spawn is to take the whole path. */
static int spawn_prepared(struct executor *ex, struct exec_entry *e, uint64_t id, char **argv, char **envp,
			  const char *cwd_root, const char *cwd_rel)
{
	reply_t reply = BOXKITE__EXECUTOR__REPLY__INIT;
	Boxkite__Executor__Spawned spawned = BOXKITE__EXECUTOR__SPAWNED__INIT;
	_cleanup_error_ bk_error *err = NULL;
	struct bk_step_report report;
	bk_spawned w = ex->warm.s;
	int ret;

	ex->warm.ready = false;
	e->cgroup = ex->warm.cgroup;
	memset(&ex->warm.cgroup, 0, sizeof(ex->warm.cgroup));
	ret = bk_spawn_order(&w, argv, envp, cwd_root, cwd_rel, &report, &err);
	if (ret == 0 && epoll_ctl(ex->epfd, EPOLL_CTL_MOD, w.pidfd,
				  &(struct epoll_event){ .events = EPOLLIN, .data.ptr = e }) < 0)
		ret = bk_error_errno(&err, errno, "cannot watch the exec");
	if (ret < 0) {
		epoll_ctl(ex->epfd, EPOLL_CTL_DEL, w.pidfd, NULL);
		bk_pidfd_kill_reap(w.pidfd);
		bk_spawned_close(&w);
		if (report.step != BOXKITE__EXECUTOR__STEP__STEP_CHDIR) {
			/* -EAGAIN: a directory the whole path resolves; anything else, the init died. */
			if (ret != -EAGAIN)
				bk_log(BK_LOG_ERROR, "executor: the exec prepared ahead: %s", bk_error_msg(err));
			bk_exec_cgroup_release(&ex->cgroups, &e->cgroup);
			return 1;
		}
		ret = spawn_failed(ex, e, id, -ret, report.step, bk_step_name(report.step), bk_error_msg(err));
		warm_prepare(ex);
		return ret;
	}
	e->pidfd = TAKE_FD(w.pidfd);
	e->status_fd = TAKE_FD(w.status_r);
	e->next = ex->execs;
	ex->execs = e;
	reply.id = id;
	reply.kind_case = BOXKITE__EXECUTOR__REPLY__KIND_SPAWNED;
	reply.spawned = &spawned;
	ret = send_reply(ex, &reply, (const int[]){ w.stdin_w, w.stdout_r, w.stderr_r }, 3);
	bk_spawned_close(&w);
	/* The next one at once, while this command starts: made when this one ends instead, its
	 * whole preparation was on the round trip of a caller that runs commands back to back. */
	warm_prepare(ex);
	return ret;
}

static int order_spawn(void *server, const bk_order *o, int *in_fds, size_t in_nfds)
{
	struct executor *ex = server;
	const Boxkite__Executor__Spawn *s = o->spawn;
	uint64_t id = o->id;
	reply_t reply = BOXKITE__EXECUTOR__REPLY__INIT;
	Boxkite__Executor__Spawned spawned = BOXKITE__EXECUTOR__SPAWNED__INIT;
	struct bk_step_report report;
	struct exec_entry *e = NULL;
	_cleanup_error_ bk_error *err = NULL;
	bk_spawned out;
	char cwd[4096], meminfo[BK_MEMINFO_MAX];
	const char *cwd_rel;
	const bk_root *root = NULL;
	_cleanup_free_ char **argv = NULL, **envp = NULL;
	int ret;

	(void)in_fds;
	(void)in_nfds;
	if (!ex->sandbox.ready)
		return reply_error(ex, id, EAGAIN, "sandbox", ex->sandbox.why);
	if (ex->hold)
		return reply_error(ex, id, EAGAIN, "reset", "a reset holds the sandbox: nothing starts until it is over");
	/* Checked (check_spawn): normalized here, and its root found. */
	if (bk_sandbox_path(&ex->roots, s->cwd, cwd, sizeof(cwd), &root, &err) < 0)
		return reply_error(ex, id, EINVAL, "order", bk_error_msg(err));
	if (exec_find(ex, s->exec_id))
		return reply_error(ex, id, EEXIST, "order", "exec id in use");
	/* A grant within this executor's own ceiling, whatever the front checked; one reaching a
	 * brokered destination needs the proxy's CA, which a proxy starting again has not sent yet. */
	bool brokered = false;
	if (s->n_egress && (ret = bk_proxyctl_check(&ex->egress, s->egress, s->n_egress, &brokered, &err)) < 0)
		return reply_error(ex, id, -ret, "egress", bk_error_msg(err));
	if (brokered && !ex->egress.ready)
		return reply_error(ex, id, EAGAIN, "egress", "the egress proxy is starting: its CA is not there yet");

	argv = calloc(s->n_argv + 1, sizeof(*argv));
	envp = calloc(s->n_env + 1, sizeof(*envp));
	e = calloc(1, sizeof(*e));
	if (!argv || !envp || !e) {
		free(e);
		return reply_error(ex, id, ENOMEM, "order", "out of memory");
	}
	e->egress_listener = -1;
	memcpy(argv, s->argv, s->n_argv * sizeof(*argv));
	memcpy(envp, s->env, s->n_env * sizeof(*envp));
	cwd_rel = cwd + strlen(root->path);
	cwd_rel = *cwd_rel == '/' ? cwd_rel + 1 : ".";

	e->id = s->exec_id;
	/* A plain command (its own fresh network, pipes) runs on the exec prepared ahead — unless the
	 * sandbox's mounts changed since: its copy of them is then out of date. */
	if (ex->warm.ready && mounts_changed(ex))
		warm_drop(ex);
	if (ex->warm.ready && !s->tty && !s->sandbox_net && !s->n_egress &&
	    (ret = spawn_prepared(ex, e, id, argv, envp, root->path, cwd_rel)) <= 0)
		return ret;
	int netns = -1;
	if (s->n_egress && (ret = egress_prepare(ex, s, e, &netns, &err)) < 0) {
		exec_entry_free(e);
		return reply_error(ex, id, -ret, "egress", bk_error_msg(err));
	}
	ret = bk_cgroups_take(&ex->cgroups, &e->cgroup, &err);
	if (ret < 0) {
		bk_close(netns);
		exec_entry_free(e);
		return reply_error(ex, id, -ret, "cgroup", bk_error_msg(err));
	}
	bk_spawn_request rq = {
		.argv = argv,
		.envp = envp,
		.cwd_root = root->path,
		.cwd_rel = cwd_rel,
		.limits = exec_limits(ex),
		.ns = &ex->sandbox.ns,
		/* A process that exposes a port: the sandbox's own network namespace, the one
		 * exception (DESIGN.md §5); a granted one, the fresh namespace its listener is in;
		 * every other command a fresh one. */
		.netns = s->sandbox_net ? fcntl(ex->sandbox.ns.net, F_DUPFD_CLOEXEC, 3)
			 : s->n_egress  ? netns
					: bk_netns_pool_take(&ex->netns),
		.ca_bundle = brokered ? ex->egress.bundle : NULL,
		.ca_len = brokered ? ex->egress.bundle_len : 0,
		.meminfo = exec_meminfo(ex, meminfo),
		.tty = s->tty,
		.rows = (unsigned short)s->rows,
		.cols = (unsigned short)s->cols,
	};
	if (s->sandbox_net && rq.netns < 0)
		return spawn_failed(ex, e, id, errno, BOXKITE__EXECUTOR__STEP__STEP_NONE, "setns(net)",
				    "cannot open the sandbox's network namespace");
	ret = bk_spawn(&ex->spawner, &rq, &out, &report, &err);
	/* The child holds the namespace now (or it was never entered): ours goes. */
	bk_close(rq.netns);
	if (ret < 0)
		return spawn_failed(ex, e, id, -ret, report.step, report.step ? bk_step_name(report.step) : "clone",
				    bk_error_msg(err));
	/* Unwatched, its exit would never be reported and its call never answered: it does not
	 * run at all. */
	if (epoll_ctl(ex->epfd, EPOLL_CTL_ADD, out.pidfd, &(struct epoll_event){ .events = EPOLLIN, .data.ptr = e }) < 0) {
		int errnum = errno;
		bk_pidfd_kill_reap(out.pidfd);
		bk_spawned_close(&out);
		return spawn_failed(ex, e, id, errnum, BOXKITE__EXECUTOR__STEP__STEP_NONE, "epoll_ctl",
				    "cannot watch the exec");
	}
	e->pidfd = TAKE_FD(out.pidfd);
	e->status_fd = TAKE_FD(out.status_r);
	e->next = ex->execs;
	ex->execs = e;
	/* It runs: the proxy serves its listener from now until it ends. */
	if (e->egress_listener >= 0)
		bk_proxyctl_open(&ex->egress, e->id, e->egress, e->n_egress, e->key_id, e->egress_listener);

	reply.id = id;
	reply.kind_case = BOXKITE__EXECUTOR__REPLY__KIND_SPAWNED;
	reply.spawned = &spawned;
	ret = send_reply(ex, &reply, (const int[]){ out.stdin_w, out.stdout_r, out.stderr_r }, 3);
	bk_spawned_close(&out);
	/* The answer is out: now, off its latency path, wait in the next exec's cgroup. */
	cgroups_restage(ex);
	return ret;
}

/* --- KILL and exits -------------------------------------------------------------------------- */

static int check_kill(const bk_roots *roots, const bk_order *o, bk_error **err)
{
	(void)roots;
	if (o->kill->exec_id == 0)
		return bk_error_invalid(err, "exec id 0");
	if (o->kill->signal < 0 || o->kill->signal > 64)
		return bk_error_invalid(err, "bad signal");
	return 0;
}

static int order_kill(void *server, const bk_order *o, int *fds, size_t nfds)
{
	struct executor *ex = server;
	reply_t reply = BOXKITE__EXECUTOR__REPLY__INIT;
	Boxkite__Executor__Killed killed = BOXKITE__EXECUTOR__KILLED__INIT;
	struct exec_entry *e = exec_find(ex, o->kill->exec_id);
	int sig = o->kill->signal ? o->kill->signal : SIGKILL;
	uint64_t id = o->id;

	(void)fds;
	(void)nfds;
	if (!e)
		return reply_error(ex, id, ESRCH, "kill", "no such exec (it exited)");
	if (pidfd_send_signal(e->pidfd, sig, NULL, 0) < 0 && errno != ESRCH)
		return reply_error(ex, id, errno, "kill", strerror(errno));
	reply.id = id;
	reply.kind_case = BOXKITE__EXECUTOR__REPLY__KIND_KILLED;
	reply.killed = &killed;
	return send_reply(ex, &reply, NULL, 0);
}

/* --- KILL_ALL (reset) ------------------------------------------------------------------------ */

/* A pending KillAll is answered once the last exec is reaped: every Exited event went out
 * before this reply, on the same channel, so the front has taken them all when it reads it. */
static int kill_all_answer(struct executor *ex)
{
	reply_t reply = BOXKITE__EXECUTOR__REPLY__INIT;
	Boxkite__Executor__Done done = BOXKITE__EXECUTOR__DONE__INIT;
	uint64_t id = ex->kill_all_id;
	int ret;

	if (!ex->kill_all_id || ex->execs)
		return 0;
	ex->kill_all_id = 0;
	/* A Reset's (hold): what the commands' sockets left in the sandbox's network namespace —
	 * connections, TIME_WAIT, their peers' addresses and ports — is not the next tenant's to
	 * read. The exposed-port processes are dead: a fresh namespace from now on. */
	if (ex->hold && (ret = sandbox_net_renew(ex)) < 0)
		return reply_error(ex, id, -ret, "netns", "cannot make the sandbox a fresh network namespace");
	/* Nor is what the last tenant's execs left charged to their cgroups: none is reused. */
	if (ex->hold)
		bk_cgroups_drop_spares(&ex->cgroups);
	done.count = ex->kill_all_count;
	reply.id = id;
	reply.kind_case = BOXKITE__EXECUTOR__REPLY__KIND_DONE;
	reply.done = &done;
	return send_reply(ex, &reply, NULL, 0);
}

static void kill_all_execs(struct executor *ex)
{
	for (struct exec_entry *e = ex->execs; e; e = e->next)
		pidfd_send_signal(e->pidfd, SIGKILL, NULL, 0);
}

static int order_kill_all(void *server, const bk_order *o, int *fds, size_t nfds)
{
	struct executor *ex = server;

	(void)fds;
	(void)nfds;
	if (ex->kill_all_id)
		return reply_error(ex, o->id, EBUSY, "kill all", "a KillAll is already waiting for its execs");
	ex->hold = o->kill_all->hold;
	ex->kill_all_id = o->id;
	ex->kill_all_count = 0;
	for (struct exec_entry *e = ex->execs; e; e = e->next)
		ex->kill_all_count++;
	kill_all_execs(ex);
	/* Prepared for this tenant's sandbox (or the last one's): not for what comes after. */
	warm_drop(ex);
	return kill_all_answer(ex);
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
	bk_exec_cgroup_release(&ex->cgroups, &e->cgroup);
	/* Its connections end with it. */
	if (e->egress_listener >= 0)
		bk_proxyctl_close(&ex->egress, e->id);
	exec_entry_free(e);
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
	if (send_reply(ex, &reply, NULL, 0) < 0)
		return -1;
	/* Where none is prepared (this one took the whole path, or the last preparation failed),
	 * the next now that this one's end is on its way to the front. */
	warm_prepare(ex);
	return kill_all_answer(ex);
}

/* --- the file worker ------------------------------------------------------------------------- */

static void files_stop(struct executor *ex)
{
	if (ex->files.pid <= 0)
		return;
	epoll_ctl(ex->epfd, EPOLL_CTL_DEL, ex->files.pidfd, NULL);
	bk_fileworker_stop(&ex->files);
}

/* A file worker for the sandbox, its channel handed to the front (event FilesReady). Tried
 * again after FILES_RETRY_MS when it cannot be started. */
static void files_start(struct executor *ex)
{
	const bk_fileworker_config fcfg = { .roots = &ex->roots, .creds = &ex->spawner.creds,
					    .filter = &ex->files_filter, .userns = ex->spawner.userns };
	reply_t reply = BOXKITE__EXECUTOR__REPLY__INIT;
	Boxkite__Executor__FilesReady ready = BOXKITE__EXECUTOR__FILES_READY__INIT;
	bk_error *err = NULL;
	int fd = -1;

	ex->files_retry_at = 0;
	if (!ex->sandbox.ready || ex->files.pid > 0)
		return;
	ex->files_started_ms = bk_clock_monotonic_ms();
	if (bk_fileworker_start(&fcfg, ex->sandbox.ns.mnt, &ex->files, &fd, &err) < 0) {
		bk_log(BK_LOG_ERROR, "executor: no file worker: %s", bk_error_msg(err));
		bk_error_free(err);
		ex->files_retry_at = ex->files_started_ms + FILES_RETRY_MS;
		return;
	}
	/* Unwatched, its death would leave the front without file service for good. */
	if (epoll_ctl(ex->epfd, EPOLL_CTL_ADD, ex->files.pidfd,
		      &(struct epoll_event){ .events = EPOLLIN, .data.ptr = &tag_files }) < 0) {
		bk_log(BK_LOG_ERROR, "executor: cannot watch the file worker: %s", strerror(errno));
		bk_close(fd);
		bk_fileworker_stop(&ex->files);
		ex->files_retry_at = ex->files_started_ms + FILES_RETRY_MS;
		return;
	}
	reply.kind_case = BOXKITE__EXECUTOR__REPLY__KIND_FILES_READY;
	reply.files_ready = &ready;
	send_reply(ex, &reply, &fd, 1);
	bk_close(fd);
}

/* The file worker died by itself: another one, no sooner than FILES_RETRY_MS after the last. */
static void files_exited(struct executor *ex)
{
	int status;

	epoll_ctl(ex->epfd, EPOLL_CTL_DEL, ex->files.pidfd, NULL);
	status = bk_fileworker_reap(&ex->files);
	bk_log(BK_LOG_ERROR, "executor: the file worker exited (wait status %#x): starting another", (unsigned)status);
	ex->files_retry_at = ex->files_started_ms + FILES_RETRY_MS;
}

/* --- the egress proxy ------------------------------------------------------------------------ */

/* Watch the running proxy: its pidfd, and its channel for its answer (and for flushing). */
static void egress_arm(struct executor *ex)
{
	bk_proxyctl *pc = &ex->egress;
	uint32_t want;

	if (pc->pid <= 0) {
		/* Its descriptors were closed with it, which took them out of the epoll set. */
		ex->egress_armed = 0;
		return;
	}
	want = EPOLLIN | (bk_channel_queued(&pc->ch) ? EPOLLOUT : 0);
	if (!ex->egress_armed) {
		if (epoll_ctl(ex->epfd, EPOLL_CTL_ADD, pc->pidfd,
			      &(struct epoll_event){ .events = EPOLLIN, .data.ptr = &tag_egress_pid }) < 0 ||
		    epoll_ctl(ex->epfd, EPOLL_CTL_ADD, pc->ch.fd,
			      &(struct epoll_event){ .events = want, .data.ptr = &tag_egress_channel }) < 0) {
			/* Unwatched, its death would go unseen: started again instead. */
			bk_proxyctl_lost(pc, "it cannot be watched");
			return;
		}
	} else if (want != ex->egress_armed &&
		   epoll_ctl(ex->epfd, EPOLL_CTL_MOD, pc->ch.fd,
			     &(struct epoll_event){ .events = want, .data.ptr = &tag_egress_channel }) < 0) {
		bk_proxyctl_lost(pc, "its channel cannot be watched");
		return;
	}
	ex->egress_armed = want;
}

/* The proxy is ready: every running granted exec's listener and grant to it (again, after a
 * restart: what the last one served died with it). */
static void egress_reopen(struct executor *ex)
{
	for (struct exec_entry *e = ex->execs; e; e = e->next)
		if (e->egress_listener >= 0)
			bk_proxyctl_open(&ex->egress, e->id, e->egress, e->n_egress, e->key_id, e->egress_listener);
}

static void egress_restart(struct executor *ex)
{
	_cleanup_error_ bk_error *err = NULL;

	if (bk_proxyctl_start(&ex->egress, &err) < 0)
		bk_log(BK_LOG_ERROR, "executor: %s", bk_error_msg(err));
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
		int ret = sandbox_net_renew(ex);
		/* A sandbox whose end would go unnoticed is not one to use: tried again later. */
		if (ret < 0) {
			bk_log(BK_LOG_ERROR, "executor: no network namespace for the sandbox: %s", strerror(-ret));
			bk_sandbox_stop(&ex->sandbox);
		} else if (epoll_ctl(ex->epfd, EPOLL_CTL_ADD, ex->sandbox.init_pidfd,
				     &(struct epoll_event){ .events = EPOLLIN, .data.ptr = &tag_sandbox }) < 0) {
			bk_log(BK_LOG_ERROR, "executor: cannot watch the sandbox's init: %s", strerror(errno));
			bk_sandbox_stop(&ex->sandbox);
		} else {
			files_start(ex);
			mounts_watch(ex);
		}
	}
	else if (err)
		bk_log(BK_LOG_ERROR, "executor: sandbox: %s", bk_error_msg(err));
	bk_error_free(err);
	cgroups_restage(ex);
	warm_prepare(ex);
	if (was != ex->sandbox.ready)
		send_state(ex, 0);
}

/* The sandbox's init exited (container restart, or a local sandbox killed): commands still
 * running there belong to a sandbox that is gone — kill them — then make or find it again. */
static void sandbox_lost(struct executor *ex)
{
	epoll_ctl(ex->epfd, EPOLL_CTL_DEL, ex->sandbox.init_pidfd, NULL);
	kill_all_execs(ex);
	warm_drop(ex);
	mounts_unwatch(ex);
	files_stop(ex);
	bk_sandbox_lost(&ex->sandbox);
	send_state(ex, 0);
	sandbox_acquire(ex);
}

/* --- orders ---------------------------------------------------------------------------------- */

static int serve_ping(void *server, const bk_order *o, int *fds, size_t nfds)
{
	(void)fds;
	(void)nfds;
	return send_state(server, o->id);
}

/* The key file, opened for the front (which may not: it runs as its own user). The path is
 * boxkited's own configuration, never the front's word. */
static int serve_key_file(void *server, const bk_order *o, int *fds, size_t nfds)
{
	struct executor *ex = server;
	_cleanup_close_ int fd = -1;

	(void)fds;
	(void)nfds;
	if (!ex->cfg->key_file[0])
		return reply_error(ex, o->id, ENOENT, "key file", "boxkited has no --key-file");
	fd = bk_keyring_open(ex->cfg->key_file);
	if (fd < 0)
		return reply_error(ex, o->id, -fd, "open", ex->cfg->key_file);
	return bk_answer_opened(&ex->ch, o->id, fd);
}

/* --- CONNECT: the preview relay's way into the sandbox's network namespace ------------------ */

static int check_connect(const bk_roots *roots, const bk_order *o, bk_error **err)
{
	(void)roots;
	if (o->connect->port < 1 || o->connect->port > 65535)
		return bk_error_invalid(err, "a port is 1-65535");
	return 0;
}

/* The socket is made in the sandbox's network namespace and stays there whatever the executor
 * does next; the executor goes back to its own at once (single-threaded: nothing else runs in
 * between). The connect is begun and not waited for: a listener in the sandbox whose backlog is
 * full (backlog 0, never accepting) makes loopback's SYN wait for its retries, up to two minutes,
 * and the executor blocked in connect() held every exec behind it. The front waits instead. */
static int order_connect(void *server, const bk_order *o, int *fds, size_t nfds)
{
	struct executor *ex = server;
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons((uint16_t)o->connect->port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	_cleanup_close_ int sock = -1;
	int errnum;

	(void)fds;
	(void)nfds;
	if (!ex->sandbox.ready)
		return reply_error(ex, o->id, EAGAIN, "sandbox", ex->sandbox.why);
	if (setns(ex->sandbox.ns.net, CLONE_NEWNET) < 0)
		return reply_error(ex, o->id, errno, "setns(net)", strerror(errno));
	sock = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	errnum = errno;
	if (setns(ex->self_net, CLONE_NEWNET) < 0) {
		/* Everything the executor made next would be in the sandbox's namespace. */
		bk_log(BK_LOG_ERROR, "executor: cannot return to its own network namespace: %s", strerror(errno));
		abort();
	}
	if (sock < 0)
		return reply_error(ex, o->id, errnum, "socket", strerror(errnum));
	if (connect(sock, (struct sockaddr *)&to, sizeof(to)) < 0 && errno != EINPROGRESS)
		return reply_error(ex, o->id, errno, "connect", strerror(errno));
	return bk_answer_opened(&ex->ch, o->id, sock);
}

/* Configure: what the front configured boxkited with, checked as any order is. */
static int check_configure(const bk_roots *roots, const bk_order *o, bk_error **err)
{
	const Boxkite__Executor__Configure *c = o->configure;
	bk_roots all = { .n = 0 };

	(void)roots;
	if (c->sandbox_uid == 0)
		return bk_error_invalid(err, "the sandbox user cannot be root");
	if (!c->exec_memory || !c->exec_pids || !c->exec_nofile || !c->exec_nproc || !c->exec_fsize)
		return bk_error_invalid(err, "an exec limit of 0");
	if (c->sandbox_memory < c->exec_memory || c->sandbox_pids < c->exec_pids)
		return bk_error_invalid(err, "the sandbox's limits are below one exec's");
	if (c->front_uid == 0 || c->front_uid == c->sandbox_uid)
		return bk_error_invalid(err, "the front's user is neither root nor the sandbox's");
	if (c->init_path[0] != '/')
		return bk_error_invalid(err, "the init is not an absolute path");
	if (c->pod ? !c->init_name[0] : c->workspace[0] != '/' || c->home[0] != '/' || !c->tmp_size || !c->shm_size)
		return bk_error_invalid(err, "%s",
					c->pod ? "pod mode needs the name of the sandbox's init"
					       : "local mode needs an absolute workspace and home, and sizes of /tmp and /dev/shm");
	if (c->key_file[0] && c->key_file[0] != '/')
		return bk_error_invalid(err, "the key file is not an absolute path");
	if (c->n_roots == 0 || c->n_roots > BK_ROOTS_MAX)
		return bk_error_invalid(err, "1 to 8 roots");
	if (c->egress) {
		const Boxkite__Executor__Egress *e = c->egress;
		bk_egress_pattern p;
		bk_egress_host h;
		uint16_t port;
		int ret;
		if (e->n_ceiling == 0 || e->n_ceiling > BK_EGRESS_CEILING_MAX ||
		    e->n_credentials > BK_PROXYCTL_CREDENTIALS_MAX)
			return bk_error_invalid(err, "egress: 1-256 ceiling patterns, at most 64 credentials");
		for (size_t i = 0; i < e->n_ceiling; i++)
			if ((ret = bk_egress_pattern_parse(e->ceiling[i], &p, err)) < 0)
				return bk_error_prefix(err, ret, "egress ceiling");
		for (size_t i = 0; i < e->n_credentials; i++) {
			if ((ret = bk_egress_destination_parse(e->credentials[i]->destination, &h, &port, err)) < 0)
				return bk_error_prefix(err, ret, "egress credential");
			if (e->credentials[i]->path[0] != '/')
				return bk_error_invalid(err, "egress: a credential's file is an absolute path");
		}
		if (e->path[0] != '/')
			return bk_error_invalid(err, "egress: the proxy is not an absolute path");
		if (e->uid == 0 || e->uid == c->sandbox_uid || e->uid == c->front_uid)
			return bk_error_invalid(err, "egress: the proxy's user is neither root, the sandbox's nor the front's");
		if (!e->max_connections || !e->idle_ms || !e->connect_ms || e->header_max < 1024 || e->header_max > 65536)
			return bk_error_invalid(err, "egress: limits of at least 1, a head of 1-64 KiB");
	}
	for (size_t i = 0; i < c->n_roots; i++) {
		char spec[BK_ROOT_PATH_MAX + 8];
		if (snprintf(spec, sizeof(spec), "%s%s", c->roots[i]->path, c->roots[i]->read_only ? ":ro" : "") >=
		    (int)sizeof(spec))
			return bk_error_invalid(err, "a root's path is too long");
		int ret = bk_roots_add(&all, spec, err);
		if (ret < 0)
			return ret;
	}
	return 0;
}

static int serve_configure(void *server, const bk_order *o, int *fds, size_t nfds)
{
	(void)fds;
	(void)nfds;
	return reply_error(server, o->id, EALREADY, "order", "the executor is configured once, at start-up");
}

/* What the executor serves: spawning, and the one file it opens (file orders are the file
 * worker's, fileworker.c). */
static const bk_order_row executor_rows[] = {
	{ BOXKITE__EXECUTOR__ORDER__KIND_CONFIGURE, 0, bk_order_check_none, serve_configure },
	{ BOXKITE__EXECUTOR__ORDER__KIND_PING, 0, bk_order_check_none, serve_ping },
	{ BOXKITE__EXECUTOR__ORDER__KIND_SPAWN, 0, check_spawn, order_spawn },
	{ BOXKITE__EXECUTOR__ORDER__KIND_KILL, 0, check_kill, order_kill },
	{ BOXKITE__EXECUTOR__ORDER__KIND_OPEN_KEY_FILE, 0, bk_order_check_none, serve_key_file },
	{ BOXKITE__EXECUTOR__ORDER__KIND_CONNECT, 0, check_connect, order_connect },
	{ BOXKITE__EXECUTOR__ORDER__KIND_KILL_ALL, 0, bk_order_check_none, order_kill_all },
};

const bk_order_table bk_executor_orders = { executor_rows, BK_ARRAY_SIZE(executor_rows) };

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

static int executor_setup(struct executor *ex)
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
	int ret;

	const bk_cgroup_limits limits = {
		.exec_memory = ex->cfg->exec_memory,
		.exec_pids = ex->cfg->exec_pids,
		.sandbox_memory = ex->cfg->sandbox_memory,
		.sandbox_pids = ex->cfg->sandbox_pids,
	};

	ex->epfd = epoll_create1(EPOLL_CLOEXEC);
	ex->self_net = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (ex->epfd < 0 || ex->self_net < 0)
		return -1;
	/* The cgroup helpers first: the remover keeps CAP_DAC_OVERRIDE, which the executor drops.
	 * Then the executor narrows itself, before it makes anything else, so that every process it
	 * makes later (the netns maker, the sandbox, each exec) starts from its narrow set — and the
	 * spawner reads the bounding set its children have to empty once, already final. */
	if ((ret = bk_seccomp_compile(&ex->seccomp, &err)) < 0 ||
	    (ret = bk_seccomp_compile_files(&ex->files_filter, &err)) < 0 ||
	    (ret = bk_cgroups_init(&ex->cgroups, "/sys/fs/cgroup", "/proc/self/cgroup", &limits, &err)) < 0) {
		bk_log(BK_LOG_ERROR, "executor: set-up: %s", bk_error_msg(err));
		bk_error_free(err);
		return -1;
	}
	/* The sandbox's own user namespace: the kernel's per-user limits counted per sandbox. Made
	 * before the executor narrows itself: mapping root needs CAP_SETFCAP, which it then drops.
	 * Where none can be made, every sandbox of the node shares them, and the profile says so. */
	uid_t owner;
	ret = bk_userns_make(&owner, &err);
	if (ret < 0) {
		bk_log(BK_LOG_ERROR, "executor: no user namespace of the sandbox's own (%s): the kernel's per-user "
				     "limits are shared with every sandbox of uid %u",
		       bk_error_msg(err), (unsigned)scfg.uid);
		bk_error_free(err);
		err = NULL;
	} else {
		ex->userns = ret;
	}
	/* An executor with more privilege than it documents does not run. */
	if (drop_capabilities() < 0) {
		bk_log(BK_LOG_ERROR, "executor: cannot narrow the executor's capabilities: %s", strerror(errno));
		return -1;
	}
	if ((ret = bk_spawner_init(&ex->spawner, &ex->seccomp, ex->cfg->init_path, scfg.uid, scfg.gid, &err)) < 0) {
		bk_log(BK_LOG_ERROR, "executor: set-up: %s", bk_error_msg(err));
		bk_error_free(err);
		return -1;
	}
	if (ex->userns >= 0) {
		ex->spawner.userns = TAKE_FD(ex->userns);
		/* Joining it gives a process every capability there, the bounding set full: all of it
		 * is dropped then, not only what the executor's set held. */
		ex->spawner.creds.bounding = bk_capbset_all();
	}
	if (ex->cgroups.mode == BK_CGROUP_NONE)
		bk_log(BK_LOG_ERROR, "executor: no per-exec cgroups (%s): limits are rlimits only", ex->cgroups.why_none);
	if (bk_netns_pool_start(&ex->netns, NETNS_POOL_DEPTH, &err) < 0) {
		bk_log(BK_LOG_ERROR, "executor: no netns pool (each exec makes its own): %s", bk_error_msg(err));
		bk_error_free(err);
		err = NULL;
	}
	/* The egress proxy, before the sandbox: a configuration it refuses (a credential file of the
	 * wrong mode or form) stops boxkited at start-up, not at the first granted exec. */
	if (bk_proxyctl_init(&ex->egress, ex->cfg->egress, ex->spawner.creds.bounding, &err) < 0 ||
	    (bk_proxyctl_on(&ex->egress) && (bk_proxyctl_start(&ex->egress, &err) < 0 ||
					     bk_proxyctl_wait_ready(&ex->egress, EGRESS_START_MS, &err) < 0))) {
		bk_log(BK_LOG_ERROR, "executor: egress: %s", bk_error_msg(err));
		bk_error_free(err);
		return -1;
	}
	if (bk_proxyctl_on(&ex->egress)) {
		reply_t ready = BOXKITE__EXECUTOR__REPLY__INIT;
		Boxkite__Executor__EgressReady er = BOXKITE__EXECUTOR__EGRESS_READY__INIT;
		ready.kind_case = BOXKITE__EXECUTOR__REPLY__KIND_EGRESS_READY;
		ready.egress_ready = &er;
		send_reply(ex, &ready, &ex->egress.stats_fd, 1);
		egress_arm(ex);
	}
	snprintf(ex->profile, sizeof(ex->profile),
		 "bk1:netns-fresh,pidns-nested,uid-%u,userns-%s,caps-none,nnp,seccomp-%08x,cgroup-%s,rlimits", scfg.uid,
		 ex->spawner.userns >= 0 ? "own" : "none", ex->seccomp.id,
		 ex->cgroups.mode == BK_CGROUP_V1 ? "v1" : ex->cgroups.mode == BK_CGROUP_V2 ? "v2" : "none");
	bk_sandbox_init(&ex->sandbox, &scfg);
	/* A restarted sidecar: what the last executor ran must not run on unwatched. */
	if (ex->cfg->pod) {
		ret = bk_sandbox_kill_orphans(&ex->sandbox);
		if (ret > 0)
			bk_log(BK_LOG_WARN, "executor: killed %d exec(s) a previous executor left running", ret);
		else if (ret < 0)
			bk_log(BK_LOG_ERROR, "executor: cannot look for execs a previous executor left: %s", strerror(-ret));
	}
	ex->armed = EPOLLIN;
	if (epoll_ctl(ex->epfd, EPOLL_CTL_ADD, ex->ch.fd, &(struct epoll_event){ .events = EPOLLIN, .data.ptr = &tag_channel }) < 0) {
		bk_log(BK_LOG_ERROR, "executor: epoll_ctl: %s", strerror(errno));
		return -1;
	}
	sandbox_acquire(ex);
	return 0;
}

static void executor_teardown(struct executor *ex)
{
	warm_drop(ex);
	mounts_unwatch(ex);
	kill_all_execs(ex);
	while (ex->execs) {
		siginfo_t info;
		waitid(P_PIDFD, (id_t)ex->execs->pidfd, &info, WEXITED);
		exec_remove(ex, ex->execs);
	}
	files_stop(ex);
	bk_proxyctl_fini(&ex->egress);
	bk_sandbox_stop(&ex->sandbox);
	bk_cgroups_fini(&ex->cgroups);
	bk_netns_pool_stop(&ex->netns);
	bk_spawner_fini(&ex->spawner);
	ex->self_net = bk_close(ex->self_net);
	ex->userns = bk_close(ex->userns);
	bk_seccomp_free(&ex->seccomp);
	free(ex->files_filter.filter);
	bk_channel_fini(&ex->ch);
	bk_close(ex->epfd);
	bk_order_free(ex->configure);
}

/* Register the channel for what the loop can do now: read orders while the answers waiting
 * for the front are few, write while any wait. */
static int channel_arm(struct executor *ex)
{
	uint32_t want = bk_orders_events(&ex->ch);

	if (want == ex->armed)
		return 0;
	if (epoll_ctl(ex->epfd, EPOLL_CTL_MOD, ex->ch.fd, &(struct epoll_event){ .events = want, .data.ptr = &tag_channel }) < 0)
		return -errno;
	ex->armed = want;
	return 0;
}

/* What the executor takes first, and only first: its configuration. */
static const bk_order_row first_rows[] = {
	{ BOXKITE__EXECUTOR__ORDER__KIND_CONFIGURE, 0, check_configure, NULL },
};

const bk_order_table bk_executor_first_order = { first_rows, BK_ARRAY_SIZE(first_rows) };

/* The first packet on the channel, waited for: Configure, or the executor does not run. 0, or
 * -errno (logged). */
static int receive_configure(struct executor *ex)
{
	struct pollfd pfd = { .fd = ex->ch.fd, .events = POLLIN };
	const bk_order_row *row;
	const uint8_t *buf;
	size_t len, nfds;
	_cleanup_error_ bk_error *err = NULL;
	int fds[BK_CHANNEL_MAX_FDS], ret;

	while ((ret = poll(&pfd, 1, -1)) < 0 && errno == EINTR)
		;
	if (ret < 0)
		return -errno;
	if ((ret = bk_channel_recv_raw(&ex->ch, &buf, &len, fds, &nfds, NULL)) < 0)
		return ret;
	for (size_t i = 0; i < nfds; i++)
		bk_close(fds[i]);
	ret = bk_order_decode(&bk_executor_first_order, NULL, buf, len, nfds, &ex->configure, &row, &err);
	if (ret < 0 && ex->configure) {
		bk_log(BK_LOG_ERROR, "executor: its configuration is refused: %s", bk_error_msg(err));
		reply_error(ex, ex->configure->id, EINVAL, "configure", bk_error_msg(err));
		bk_channel_flush(&ex->ch);
		return ret;
	}
	if (ret < 0) {
		bk_log(BK_LOG_ERROR, "executor: the front's first packet is not an order");
		return ret;
	}
	ex->cfg = ex->configure->configure;
	for (size_t i = 0; i < ex->cfg->n_roots; i++) {
		char spec[BK_ROOT_PATH_MAX + 8];
		snprintf(spec, sizeof(spec), "%s%s", ex->cfg->roots[i]->path, ex->cfg->roots[i]->read_only ? ":ro" : "");
		bk_roots_add(&ex->roots, spec, NULL); /* checked above */
	}
	return 0;
}

int bk_executor_main(int sock)
{
	struct executor ex = { .epfd = -1, .self_net = -1, .userns = -1, .mounts_fd = -1 };
	sigset_t none;
	int status = 0;

	/* Die with the front: nothing privileged outlives the process that talks to clients (set
	 * before the execve too; once more, in case another parent started us). */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	/* Only the front (channel EOF) ends us — a terminal's SIGINT goes to both. */
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
	ex.netns.sock = -1;
	bk_proxyctl_init(&ex.egress, NULL, 0, NULL);
	/* No bound on what the executor queues for the front: it bounds it by not reading orders
	 * past CHANNEL_PAUSE_BYTES (its events are bounded by the execs it runs). */
	if (bk_channel_init(&ex.ch, sock, SIZE_MAX) < 0)
		return 1;
	if (receive_configure(&ex) < 0) {
		bk_channel_fini(&ex.ch);
		bk_order_free(ex.configure);
		return 1;
	}
	if (executor_setup(&ex) < 0) {
		reply_error(&ex, ex.configure->id, EIO, "executor set-up", "the executor could not start: see its log");
		bk_channel_flush(&ex.ch);
		executor_teardown(&ex);
		return 1;
	}
	/* The front's death signal (PR_SET_PDEATHSIG, SIGKILL) is sent with the dying front's
	 * credentials, and the kernel checks them as for kill(2): a front that became --front-uid
	 * may not signal a process of root's, so the signal was dropped, and an executor that was
	 * stopped or busy (not reading its channel's end) outlived the front. With the front's uid
	 * as its saved set-user-ID the executor is one the front may signal; its real and effective
	 * uid stay root's, so its privilege is what it was, and what it made before this (its
	 * helpers, the sandbox, the file worker) is not affected. */
	if (setresuid(-1, -1, ex.cfg->front_uid) < 0) {
		bk_log(BK_LOG_ERROR, "executor: setresuid: %s", strerror(errno));
		executor_teardown(&ex);
		return 1;
	}
	/* The answer to Configure: set up, and the sandbox's state. */
	if (send_state(&ex, ex.configure->id) < 0) {
		executor_teardown(&ex);
		return 1;
	}
	int64_t retry_at = 0; /* when to look for (or rebuild) a sandbox that is not ready */
	for (;;) {
		struct epoll_event evs[16];
		int64_t now = bk_clock_monotonic_ms();
		/* The next deadline: the sandbox to look for again, a file worker to start again. */
		int64_t due = ex.sandbox.ready ? -1 : retry_at;
		if (ex.files_retry_at && (due < 0 || ex.files_retry_at < due))
			due = ex.files_retry_at;
		if (ex.egress.retry_at && (due < 0 || ex.egress.retry_at < due))
			due = ex.egress.retry_at;
		int timeout = due < 0 ? -1 : due > now ? (int)(due - now) : 0;
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
		if (ex.files_retry_at && bk_clock_monotonic_ms() >= ex.files_retry_at)
			files_start(&ex);
		if (ex.egress.retry_at && bk_clock_monotonic_ms() >= ex.egress.retry_at)
			egress_restart(&ex);
		for (int i = 0; i < n; i++) {
			void *tag = evs[i].data.ptr;
			if (tag == &tag_channel) {
				int ret = 0;
				if (evs[i].events & EPOLLOUT)
					ret = bk_channel_flush(&ex.ch) < 0 ? -EPIPE : 0;
				if (ret == 0 && (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && (ex.armed & EPOLLIN))
					ret = bk_orders_serve(&ex.ch, &bk_executor_orders, &ex.roots, &ex);
				/* EPIPE: the front closed the channel, shut down. Anything else is a
				 * broken channel, and the executor never guesses. */
				if (ret < 0) {
					status = ret == -EPIPE ? 0 : 1;
					goto out;
				}
			} else if (tag == &tag_sandbox) {
				sandbox_lost(&ex);
			} else if (tag == &tag_files) {
				files_exited(&ex);
			} else if (tag == &tag_egress_pid) {
				if (ex.egress.pid > 0)
					bk_proxyctl_lost(&ex.egress, "it exited");
			} else if (tag == &tag_mounts) {
				/* Something was mounted or unmounted in the sandbox (an operator's doing:
				 * the sandbox user cannot): the exec prepared ahead has the old table. */
				warm_drop(&ex);
				if (!ex.execs)
					warm_prepare(&ex);
			} else if (tag == &tag_warm) {
				/* The exec prepared ahead died before it was used: the next Spawn makes
				 * one again. */
				warm_drop(&ex);
			} else if (tag == &tag_egress_channel) {
				if (bk_proxyctl_readable(&ex.egress) == 1)
					egress_reopen(&ex);
			} else {
				exec_exited(&ex, tag);
			}
		}
		/* Answers and events made this round (an exit, a lost sandbox) may have queued; so may
		 * orders to the egress proxy, which may have been started, or lost. */
		if (bk_proxyctl_on(&ex.egress))
			egress_arm(&ex);
		if (bk_channel_broken(&ex.ch) || channel_arm(&ex) < 0) {
			status = 1;
			break;
		}
	}
out:
	executor_teardown(&ex);
	return status;
}
