#include "exec/proxyctl.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "boxkite/egress/egress.pb-c.h"
#include "cleanup.h"
#include "clock.h"
#include "egressstats.h"
#include "log.h"
#include "secretfile.h"

/* Where the proxy finds its channel (egress/main.c). */
#define PROXY_CHANNEL_FD 3
/* Orders waiting for a proxy that does not read: past this, it is stuck, and started again. */
#define PROXY_QUEUE_MAX (4u << 20)
/* A granted exec's listener: connections waiting for the proxy's accept. */
#define LISTEN_BACKLOG 128

typedef Boxkite__Egress__Order egress_order;

/* The counters' page: zeroed, one page, sealed so that neither side can change its size. */
static int make_stats(bk_error **err)
{
	_cleanup_close_ int fd = memfd_create("bk-egress-stats", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	if (fd < 0 || ftruncate(fd, BK_EGRESS_STATS_SIZE) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
		return bk_error_errno(err, errno, "the egress counters' memory");
	return TAKE_FD(fd);
}

int bk_proxyctl_init(bk_proxyctl *pc, const Boxkite__Executor__Egress *cfg, uint64_t bounding, bk_error **err)
{
	int ret;

	memset(pc, 0, sizeof(*pc));
	pc->bin_fd = pc->stats_fd = pc->pidfd = -1;
	for (size_t i = 0; i < BK_PROXYCTL_CREDENTIALS_MAX; i++)
		pc->cred_fd[i] = -1;
	if (!cfg)
		return 0;
	pc->cfg = cfg;
	if ((ret = bk_egress_patterns_parse(cfg->ceiling, cfg->n_ceiling, &pc->ceiling, err)) < 0)
		return bk_error_prefix(err, ret, "egress ceiling");
	pc->n_ceiling = cfg->n_ceiling;
	for (size_t i = 0; i < cfg->n_credentials; i++) {
		const Boxkite__Executor__EgressCredential *c = cfg->credentials[i];
		if ((ret = bk_egress_destination_parse(c->destination, &pc->cred_host[i], &pc->cred_port[i], err)) < 0)
			return bk_error_prefix(err, ret, "--egress-credential %s", c->destination);
		if ((ret = bk_secret_file_open("--egress-credential", c->path, err)) < 0)
			return ret;
		pc->cred_fd[i] = ret;
		pc->n_creds++;
	}
	/* Opened here, executed by descriptor: nothing can swap the binary between starts. */
	pc->bin_fd = open(cfg->path, O_RDONLY | O_CLOEXEC);
	if (pc->bin_fd < 0)
		return bk_error_errno(err, errno, "cannot open the egress proxy %s", cfg->path);
	if ((ret = make_stats(err)) < 0)
		return ret;
	pc->stats_fd = ret;
	pc->creds = (bk_child_creds){ .uid = cfg->uid, .gid = cfg->uid, .bounding = bounding };
	return 0;
}

void bk_proxyctl_fini(bk_proxyctl *pc)
{
	bk_proxyctl_stop(pc);
	for (size_t i = 0; i < pc->n_creds; i++)
		pc->cred_fd[i] = bk_close(pc->cred_fd[i]);
	pc->bin_fd = bk_close(pc->bin_fd);
	pc->stats_fd = bk_close(pc->stats_fd);
	free(pc->ceiling);
	pc->ceiling = NULL;
	free(pc->bundle);
	pc->bundle = NULL;
}

/* The proxy's child, between fork and execve: a fork of the single-threaded executor, so plain
 * calls; its channel on descriptor 3 and nothing else but stdio; the proxy's user with no
 * capability, an empty bounding set and no_new_privs; default signals; an empty environment. */
__attribute__((noreturn)) static void proxy_child(const bk_proxyctl *pc, int sock)
{
	char *const argv[] = { "boxkite-egress", NULL }, *const envp[] = { NULL };
	int keep[2];

	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	setsid();
	if (sock != PROXY_CHANNEL_FD) {
		if (dup2(sock, PROXY_CHANNEL_FD) < 0)
			_exit(126);
	} else if (fcntl(sock, F_SETFD, 0) < 0) {
		_exit(126);
	}
	keep[0] = PROXY_CHANNEL_FD;
	keep[1] = pc->bin_fd;
	if (bk_child_close_fds(keep, 2) < 0 || bk_child_drop_privileges(&pc->creds) != BOXKITE__EXECUTOR__STEP__STEP_NONE ||
	    bk_child_reset_signals() < 0)
		_exit(126);
	syscall(SYS_execveat, pc->bin_fd, "", argv, envp, AT_EMPTY_PATH);
	_exit(127);
}

/* Send an order to the proxy (fds stay the caller's). */
static int send_order(bk_proxyctl *pc, egress_order *o, const int *fds, size_t nfds)
{
	int ret = bk_channel_send(&pc->ch, &o->base, fds, nfds, 0);

	return ret < 0 ? ret : 0;
}

int bk_proxyctl_start(bk_proxyctl *pc, bk_error **err)
{
	Boxkite__Egress__Configure conf = BOXKITE__EGRESS__CONFIGURE__INIT;
	Boxkite__Egress__Credential cred = BOXKITE__EGRESS__CREDENTIAL__INIT;
	Boxkite__Egress__Start start = BOXKITE__EGRESS__START__INIT;
	egress_order o = BOXKITE__EGRESS__ORDER__INIT;
	uint64_t id = 0;
	int sv[2], pidfd = -1, ret;
	long pid;

	pc->retry_at = 0;
	pc->ready = false;
	pc->started_ms = bk_clock_monotonic_ms();
	if ((ret = bk_channel_socketpair(sv)) < 0)
		return bk_error_errno(err, -ret, "the egress proxy's channel");
	pid = syscall(SYS_clone, CLONE_PIDFD | SIGCHLD, NULL, &pidfd, NULL, NULL);
	if (pid == 0) {
		bk_close(sv[0]);
		proxy_child(pc, sv[1]);
	}
	bk_close(sv[1]);
	if (pid < 0) {
		ret = bk_error_errno(err, errno, "cannot start the egress proxy");
		bk_close(sv[0]);
		return ret;
	}
	pc->pid = (pid_t)pid;
	pc->pidfd = pidfd;
	if (bk_channel_init(&pc->ch, sv[0], PROXY_QUEUE_MAX) < 0) {
		bk_proxyctl_lost(pc, "out of memory for its channel");
		return bk_error_errno(err, ENOMEM, "the egress proxy's channel");
	}
	/* Its set-up, in order; it answers Start. */
	conf.ceiling = pc->cfg->ceiling;
	conf.n_ceiling = pc->cfg->n_ceiling;
	conf.max_connections = pc->cfg->max_connections;
	conf.idle_ms = pc->cfg->idle_ms;
	conf.header_max = pc->cfg->header_max;
	conf.connect_ms = pc->cfg->connect_ms;
	o.id = ++id;
	o.kind_case = BOXKITE__EGRESS__ORDER__KIND_CONFIGURE;
	o.configure = &conf;
	ret = send_order(pc, &o, &pc->stats_fd, 1);
	for (size_t i = 0; i < pc->n_creds && ret == 0; i++) {
		cred.destination = pc->cfg->credentials[i]->destination;
		o.id = ++id;
		o.kind_case = BOXKITE__EGRESS__ORDER__KIND_CREDENTIAL;
		o.credential = &cred;
		/* The file checked at start-up, opened afresh through its descriptor: the proxy reads
		 * it from its start, whichever proxy this is, and a file put in its place since is not
		 * what it gets. */
		char self[64];
		snprintf(self, sizeof(self), "/proc/self/fd/%d", pc->cred_fd[i]);
		int fd = open(self, O_RDONLY | O_NOCTTY | O_CLOEXEC);
		if (fd < 0) {
			ret = -errno;
			break;
		}
		ret = send_order(pc, &o, &fd, 1);
		close(fd);
	}
	o.id = ++id;
	o.kind_case = BOXKITE__EGRESS__ORDER__KIND_START;
	o.start = &start;
	if (ret == 0)
		ret = send_order(pc, &o, NULL, 0);
	if (ret < 0) {
		bk_proxyctl_lost(pc, "its set-up could not be sent");
		return bk_error_errno(err, -ret, "the egress proxy's set-up");
	}
	pc->start_id = id;
	return 0;
}

/* Take one answer. 1 ready, 0 nothing (yet), <0 failed with *why. */
static int take_answer(bk_proxyctl *pc, const char **why, char *msg, size_t size)
{
	Boxkite__Egress__Reply *r = NULL;
	int fds[BK_CHANNEL_MAX_FDS];
	size_t nfds = 0;
	int ret = bk_channel_recv(&pc->ch, &boxkite__egress__reply__descriptor, (ProtobufCMessage **)&r, fds, &nfds, NULL);

	for (size_t i = 0; i < nfds; i++)
		close(fds[i]);
	if (ret == -EAGAIN)
		return 0;
	if (ret < 0) {
		*why = ret == -EPIPE ? "it closed its channel" : "its channel broke";
		return ret;
	}
	/* It answers its set-up only: an error to any of those orders, or Ready to Start. */
	if (!pc->start_id || !r->id || r->id > pc->start_id || nfds) {
		*why = "an answer it was not asked for";
		ret = -EPROTO;
	} else if (r->errnum || r->id != pc->start_id || r->kind_case != BOXKITE__EGRESS__REPLY__KIND_READY) {
		snprintf(msg, size, "its set-up was refused: %.400s", r->message);
		*why = msg;
		ret = -(r->errnum > 0 && r->errnum < 4096 ? r->errnum : EPROTO);
	} else {
		free(pc->bundle);
		pc->bundle = NULL;
		pc->bundle_len = 0;
		if (r->ready->ca_bundle.len) {
			pc->bundle = malloc(r->ready->ca_bundle.len);
			if (!pc->bundle) {
				*why = "out of memory for its CA bundle";
				ret = -ENOMEM;
			} else {
				memcpy(pc->bundle, r->ready->ca_bundle.data, r->ready->ca_bundle.len);
				pc->bundle_len = r->ready->ca_bundle.len;
			}
		}
		if (ret == 0) {
			pc->ready = true;
			pc->start_id = 0;
			ret = 1;
		}
	}
	protobuf_c_message_free_unpacked(&r->base, NULL);
	return ret;
}

int bk_proxyctl_wait_ready(bk_proxyctl *pc, int timeout_ms, bk_error **err)
{
	int64_t deadline = bk_clock_monotonic_ms() + timeout_ms;
	char msg[512];

	while (pc->pid > 0) {
		struct pollfd p[2] = { { .fd = pc->ch.fd, .events = POLLIN | (bk_channel_queued(&pc->ch) ? POLLOUT : 0) },
				       { .fd = pc->pidfd, .events = POLLIN } };
		const char *why = NULL;
		int64_t left = deadline - bk_clock_monotonic_ms();
		int ret;

		if (left <= 0 || poll(p, 2, (int)left) == 0) {
			bk_proxyctl_lost(pc, "it did not answer its set-up in time");
			return bk_error_set(err, BK_UNAVAILABLE, ETIMEDOUT, "the egress proxy did not start in %d ms", timeout_ms);
		}
		if ((p[0].revents & POLLOUT) && bk_channel_flush(&pc->ch) < 0)
			ret = -EPIPE, why = "its channel broke";
		else
			ret = take_answer(pc, &why, msg, sizeof(msg));
		if (ret == 1)
			return 0;
		if (ret < 0) {
			bk_proxyctl_lost(pc, why);
			return bk_error_set(err, BK_FAILED_PRECONDITION, -ret, "the egress proxy: %s", why);
		}
		if ((p[1].revents & POLLIN) && !(p[0].revents & POLLIN)) {
			bk_proxyctl_lost(pc, "it exited during its set-up");
			return bk_error_set(err, BK_FAILED_PRECONDITION, EPIPE,
					    "the egress proxy exited during its set-up (see its log line above)");
		}
	}
	return bk_error_set(err, BK_UNAVAILABLE, EPIPE, "the egress proxy is not running");
}

int bk_proxyctl_readable(bk_proxyctl *pc)
{
	char msg[512];
	const char *why = NULL;
	int ret;

	if (pc->pid <= 0)
		return 0;
	if (bk_channel_queued(&pc->ch) && bk_channel_flush(&pc->ch) < 0) {
		bk_proxyctl_lost(pc, "its channel broke");
		return -EPIPE;
	}
	ret = take_answer(pc, &why, msg, sizeof(msg));
	if (ret < 0)
		bk_proxyctl_lost(pc, why);
	return ret;
}

void bk_proxyctl_stop(bk_proxyctl *pc)
{
	if (pc->pid > 0) {
		pidfd_send_signal(pc->pidfd, SIGKILL, NULL, 0);
		while (waitpid(pc->pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	pc->pid = 0;
	pc->pidfd = bk_close(pc->pidfd);
	bk_channel_fini(&pc->ch);
	pc->ready = false;
	pc->start_id = 0;
}

void bk_proxyctl_lost(bk_proxyctl *pc, const char *why)
{
	int64_t now = bk_clock_monotonic_ms();

	bk_log(BK_LOG_ERROR, "executor: the egress proxy: %s: starting another", why);
	bk_proxyctl_stop(pc);
	pc->retry_at = pc->started_ms + BK_PROXYCTL_RETRY_MS > now ? pc->started_ms + BK_PROXYCTL_RETRY_MS : now;
}

int bk_proxyctl_check(const bk_proxyctl *pc, char *const *grant, size_t n, bool *brokered, bk_error **err)
{
	_cleanup_free_ bk_egress_pattern *v = NULL;
	long beyond;
	int ret;

	*brokered = false;
	if (!pc->cfg)
		return bk_error_set(err, BK_PERMISSION_DENIED, EPERM, "egress is not configured (boxkited has no --egress-allow)");
	if (n > BK_EGRESS_GRANT_MAX)
		return bk_error_invalid(err, "a grant of at most 64 patterns");
	if ((ret = bk_egress_patterns_parse(grant, n, &v, err)) < 0)
		return ret;
	if ((beyond = bk_egress_grant_beyond(v, n, pc->ceiling, pc->n_ceiling)) >= 0)
		return bk_error_set(err, BK_PERMISSION_DENIED, EPERM, "'%.300s' is beyond the egress ceiling", grant[beyond]);
	for (size_t i = 0; i < pc->n_creds && !*brokered; i++)
		*brokered = bk_egress_patterns_match(v, n, &pc->cred_host[i], pc->cred_port[i]);
	return 0;
}

int bk_proxyctl_listener(bk_proxyctl *pc, int self_net, int *netns, int *listener, bk_error **err)
{
	struct sockaddr_in at = { .sin_family = AF_INET, .sin_port = htons(BK_EGRESS_PROXY_PORT),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int sock = -1, errnum = 0;
	const char *step = NULL;
	bool left = false;

	(void)pc;
	*listener = -1;
	/* Into the exec's namespace (a pooled one, or one made here — lo up either way), make the
	 * socket there, and back at once: single-threaded, nothing else runs in between. */
	if (*netns >= 0) {
		if (setns(*netns, CLONE_NEWNET) < 0)
			step = "setns(net)";
		else
			left = true;
	} else if (unshare(CLONE_NEWNET) < 0) {
		step = "unshare(net)";
	} else if ((left = true, bk_child_loopback_up() < 0)) {
		step = "lo up";
	} else if ((*netns = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)) < 0) {
		step = "open its network namespace";
	}
	if (!step) {
		sock = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (sock < 0)
			step = "socket";
		else if (bind(sock, (struct sockaddr *)&at, sizeof(at)) < 0)
			step = "bind";
		else if (listen(sock, LISTEN_BACKLOG) < 0)
			step = "listen";
	}
	errnum = errno;
	/* (Back only from where it went: without CAP_SYS_ADMIN the way in failed, and so would this.) */
	if (left && setns(self_net, CLONE_NEWNET) < 0) {
		/* Everything the executor made next would be in the exec's namespace. */
		bk_log(BK_LOG_ERROR, "executor: cannot return to its own network namespace: %s", strerror(errno));
		abort();
	}
	if (step) {
		bk_close(sock);
		*netns = bk_close(*netns);
		return bk_error_errno(err, errnum, "the egress listener: %s", step);
	}
	*listener = sock;
	return 0;
}

void bk_proxyctl_open(bk_proxyctl *pc, uint64_t exec_id, char *const *grant, size_t n, const char *key_id,
		      int listener)
{
	Boxkite__Egress__Open open_ = BOXKITE__EGRESS__OPEN__INIT;
	egress_order o = BOXKITE__EGRESS__ORDER__INIT;

	/* Not ready: it gets every live exec's grant when it is (bk_proxyctl_readable's 1). */
	if (!pc->ready)
		return;
	open_.exec_id = exec_id;
	open_.grant = (char **)grant;
	open_.n_grant = n;
	open_.key_id = (char *)key_id;
	o.id = exec_id;
	o.kind_case = BOXKITE__EGRESS__ORDER__KIND_OPEN;
	o.open = &open_;
	if (send_order(pc, &o, &listener, 1) < 0)
		bk_proxyctl_lost(pc, "it does not take its orders");
}

void bk_proxyctl_close(bk_proxyctl *pc, uint64_t exec_id)
{
	Boxkite__Egress__Close close_ = BOXKITE__EGRESS__CLOSE__INIT;
	egress_order o = BOXKITE__EGRESS__ORDER__INIT;

	if (!pc->ready)
		return;
	close_.exec_id = exec_id;
	o.id = exec_id;
	o.kind_case = BOXKITE__EGRESS__ORDER__KIND_CLOSE;
	o.close = &close_;
	if (send_order(pc, &o, NULL, 0) < 0)
		bk_proxyctl_lost(pc, "it does not take its orders");
}
