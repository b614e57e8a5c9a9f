#include "runs/exec.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "boundary/command.h"
#include "log.h"

#define OUTPUT_INITIAL (64 * 1024)
#define DISCARD_SIZE (256 * 1024)
/* How long an exec's pipes may stay open after its init exited before it is answered. */
#define EXIT_GRACE_MS 200

struct output {
	int fd;
	uint8_t *data;
	size_t len, cap, limit;
	uint64_t dropped;
};

enum watch_kind { WATCH_STDIN, WATCH_STDOUT, WATCH_STDERR, WATCH_TIMER };

/* What an epoll event points at: one descriptor of one run. */
struct watch {
	struct exec_run *run;
	enum watch_kind kind;
};

/* What a finished run is answered with. */
enum run_outcome { RUN_RESULT, RUN_FAILED };

struct exec_run {
	struct exec_run *next;     /* in bk_execs.runs, .retired, or .dead */
	struct watch watches[4];
	bk_call *call;
	uint64_t id;
	const char *cwd;           /* as the request named it, for its error (in the request, which lives as long as the call) */
	uint32_t timeout_ms;
	struct timespec started;
	/* the exit: from the executor's Exited event, or 127/126 when execve failed */
	int exit_code, signal;
	bool oom_killed;
	bool exited, timed_out, finished;
	bool running;              /* counted in the metrics' running execs (it started) */
	size_t reserved;           /* of bk_execs.output_reserved */
	enum run_outcome outcome;
	int fail_status;           /* RUN_FAILED: the call's status and message */
	char fail_msg[512];
	/* owned by the I/O thread */
	int stdin_fd, timer_fd;
	const uint8_t *stdin_data;
	size_t stdin_len, stdin_off;
	struct output out[2];
};

/* The runs are touched by two threads: the I/O thread (pipes, timers) and the executor link's
 * thread (the executor's answers and exit events, handled right there — no hand-over, which
 * would cost two more thread wake-ups per exec). One lock covers every run, and nothing is
 * sealed, copied or sent under it: a run that is finished is retired under the lock, and
 * answered by the same thread once it has let the lock go (answer_retired). */
struct bk_execs {
	bk_server *srv;
	pthread_t thread;
	bool thread_started;
	int epfd, wake_fd;
	pthread_mutex_t lock;      /* the runs, `retired`, `dead`, `stopping` */
	bool stopping;
	struct exec_run *runs;     /* started, not finished */
	struct exec_run *retired;  /* finished, to be answered outside the lock */
	struct exec_run *dead;     /* answered and released: freed by the I/O thread after a batch */
	atomic_uint_fast64_t next_id;
	/* Output buffers: what every run started may fill, its two streams' limits, taken from
	 * --exec-output-budget when it is admitted and given back once it is answered. Past the
	 * budget an exec is refused at once, RESOURCE_EXHAUSTED: the front's memory is bounded,
	 * its OOM is never how the sidecar says "too much". */
	size_t output_reserved;
	uint8_t discard[DISCARD_SIZE];
};

static struct watch wake_watch; /* the eventfd's tag */

static void wake(bk_execs *ex)
{
	uint64_t one = 1;

	if (write(ex->wake_fd, &one, sizeof(one)) < 0)
		bk_log(BK_LOG_ERROR, "exec: cannot wake the I/O thread: %s", strerror(errno));
}

/* --- the handler (an nng callback thread) ---------------------------------------------------- */

/* The run's output buffers and their share of the budget, given back. Called with the lock held
 * (or alone, once the I/O thread has stopped). */
static void run_release(bk_execs *ex, struct exec_run *run)
{
	ex->output_reserved -= run->reserved;
	run->reserved = 0;
	for (int i = 0; i < 2; i++) {
		free(run->out[i].data);
		run->out[i].data = NULL;
	}
}

/* Called with the lock held (or alone, once the I/O thread has stopped). */
static void run_free(bk_execs *ex, struct exec_run *run)
{
	run_release(ex, run);
	for (int i = 0; i < 2; i++)
		bk_close(run->out[i].fd);
	bk_close(run->stdin_fd);
	bk_close(run->timer_fd);
	free(run);
}

static void run_started(bk_execs *ex, struct exec_run *run, const int *fds);
static void run_spawn_failed(bk_execs *ex, struct exec_run *run, int err, const bk_reply *reply);
static void maybe_finish(bk_execs *ex, struct exec_run *run);
static struct exec_run *run_find(bk_execs *ex, uint64_t id);
static void unwatch_close(bk_execs *ex, int *fd);
static void answer_retired(bk_execs *ex);
static void run_finish(bk_execs *ex, struct exec_run *run);
static int watch(bk_execs *ex, int fd, uint32_t events, struct exec_run *run, enum watch_kind kind);

/* The executor's answer to SPAWN (link thread): the command's pipes, or why not. */
static void spawn_replied(void *arg, int err, bk_reply *reply, int *fds, size_t nfds)
{
	struct exec_run *run = arg;
	bk_execs *ex = run->call->srv->execs;

	(void)nfds;
	pthread_mutex_lock(&ex->lock);
	if (!err)
		run_started(ex, run, fds);
	else
		run_spawn_failed(ex, run, err, reply);
	pthread_mutex_unlock(&ex->lock);
	answer_retired(ex);
	bk_reply_free(reply);
}

/* The exec's init is gone but its pipes are still open: answer in EXIT_GRACE_MS with what was
 * read by then. The timeout's timer becomes the grace's (it may be gone already: it fired). */
static void arm_grace(bk_execs *ex, struct exec_run *run)
{
	struct itimerspec its = { .it_value = { .tv_nsec = EXIT_GRACE_MS * 1000000L } };

	if (run->timer_fd < 0) {
		run->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
		if (run->timer_fd >= 0 && watch(ex, run->timer_fd, EPOLLIN, run, WATCH_TIMER) < 0)
			run->timer_fd = bk_close(run->timer_fd);
	}
	if (run->timer_fd < 0 || timerfd_settime(run->timer_fd, 0, &its, NULL) < 0)
		run_finish(ex, run); /* no grace without a timer: answered now */
}

void bk_execs_exited(bk_server *srv, const Boxkite__Executor__Exited *exited)
{
	bk_execs *ex = srv->execs;
	struct exec_run *run;

	pthread_mutex_lock(&ex->lock);
	run = run_find(ex, exited->exec_id);
	if (run) {
		run->exit_code = exited->exit_code;
		run->signal = exited->signal;
		run->oom_killed = exited->oom_killed;
		run->exited = true;
		/* Usually its pipes are at EOF already: answered here, at once. */
		maybe_finish(ex, run);
		/* If not, a process outside the exec's tree holds them (its stdout handed to another
		 * exec over a unix socket): what it writes is not this exec's output. The timer, now
		 * the grace's, answers with what was read. */
		if (!run->finished)
			arm_grace(ex, run);
	}
	pthread_mutex_unlock(&ex->lock);
	answer_retired(ex);
}

void bk_handle_exec(bk_call *call, const ProtobufCMessage *request)
{
	const Boxkite__V1__ExecRequest *rq = (const Boxkite__V1__ExecRequest *)request;
	bk_server *srv = call->srv;
	const bk_config *cfg = &srv->cfg;
	bk_order order = BOXKITE__EXECUTOR__ORDER__INIT;
	const bk_command_request crq = { rq->n_argv, rq->argv, rq->shell,	    rq->cwd,
					 rq->n_env,  rq->env,  rq->n_allow_net, rq->allow_net };
	_cleanup_(bk_command_fini) bk_command cmd = { 0 };
	struct exec_run *run;

	if (!srv->executor || !srv->execs) {
		bk_call_failf(call, BK_UNAVAILABLE, 0, "no executor: this server does not run commands");
		return;
	}
	if (rq->timeout_ms > cfg->exec_timeout_max_ms) {
		bk_call_failf(call, BK_INVALID_ARGUMENT, 0,
			      "timeout %g s is above the server's maximum of %g s (boxkited --exec-timeout-max)",
			      rq->timeout_ms / 1000.0, (double)cfg->exec_timeout_max_ms / 1000);
		return;
	}
	if (rq->stdout_limit > cfg->exec_output_max || rq->stderr_limit > cfg->exec_output_max) {
		bk_call_failf(call, BK_INVALID_ARGUMENT, 0,
			      "output limit above the server's maximum of %zu bytes (boxkited --exec-output-max)",
			      cfg->exec_output_max);
		return;
	}
	if (bk_command_prepare(call, &crq, &cmd) < 0)
		return;
	run = calloc(1, sizeof(*run));
	if (!run) {
		bk_call_failf(call, BK_RESOURCE_EXHAUSTED, 0, "out of memory");
		return;
	}
	clock_gettime(CLOCK_MONOTONIC, &run->started);
	run->call = call;
	run->id = atomic_fetch_add(&srv->execs->next_id, 1);
	run->cwd = cmd.cwd_asked;
	run->timeout_ms = rq->timeout_ms ? rq->timeout_ms : (uint32_t)cfg->exec_timeout_ms;
	run->stdin_fd = run->timer_fd = -1;
	run->stdin_data = rq->stdin.data;
	run->stdin_len = rq->stdin.len;
	run->out[0] = (struct output){ .fd = -1, .limit = rq->stdout_limit ? rq->stdout_limit : cfg->exec_output };
	run->out[1] = (struct output){ .fd = -1, .limit = rq->stderr_limit ? rq->stderr_limit : cfg->exec_output };
	run->reserved = run->out[0].limit + run->out[1].limit;
	pthread_mutex_lock(&srv->execs->lock);
	size_t reserved = srv->execs->output_reserved;
	bool fits = reserved + run->reserved <= cfg->exec_output_budget;
	if (fits)
		srv->execs->output_reserved += run->reserved;
	pthread_mutex_unlock(&srv->execs->lock);
	if (!fits) {
		bk_call_failf(call, BK_RESOURCE_EXHAUSTED, 0,
			      "the output of the execs running may fill %zu of the %zu bytes boxkited buffers "
			      "(--exec-output-budget), and this one's %zu do not fit: retry, or ask for less output",
			      reserved, cfg->exec_output_budget, run->reserved);
		free(run);
		return;
	}

	cmd.spawn.exec_id = run->id;
	order.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_SPAWN;
	order.spawn = &cmd.spawn;
	bk_link_send(srv->executor, &order, NULL, 0, 0, spawn_replied, run);
}

/* --- the I/O thread -------------------------------------------------------------------------- */

static int watch(bk_execs *ex, int fd, uint32_t events, struct exec_run *run, enum watch_kind kind)
{
	run->watches[kind] = (struct watch){ .run = run, .kind = kind };
	return epoll_ctl(ex->epfd, EPOLL_CTL_ADD, fd,
			 &(struct epoll_event){ .events = events, .data.ptr = &run->watches[kind] });
}

static void unwatch_close(bk_execs *ex, int *fd)
{
	if (*fd >= 0) {
		epoll_ctl(ex->epfd, EPOLL_CTL_DEL, *fd, NULL);
		*fd = bk_close(*fd);
	}
}

/* A finished run: out of the live list, its descriptors closed, onto the list of runs to answer
 * (answer_retired, once the lock is let go). Called with the lock held. */
static void run_retire(bk_execs *ex, struct exec_run *run, enum run_outcome outcome)
{
	for (struct exec_run **pp = &ex->runs; *pp; pp = &(*pp)->next) {
		if (*pp == run) {
			*pp = run->next;
			break;
		}
	}
	for (int i = 0; i < 2; i++)
		unwatch_close(ex, &run->out[i].fd);
	unwatch_close(ex, &run->stdin_fd);
	unwatch_close(ex, &run->timer_fd);
	run->finished = true;
	run->outcome = outcome;
	run->next = ex->retired;
	ex->retired = run;
}

static void run_answer(bk_execs *ex, struct exec_run *run)
{
	Boxkite__V1__ExecResponse resp = BOXKITE__V1__EXEC_RESPONSE__INIT;

	if (run->outcome == RUN_FAILED) {
		/* One that started and could not be watched still leaves the running count. */
		if (run->running)
			bk_metrics_exec_finished(&ex->srv->metrics, bk_elapsed_us(&run->started), false, false, true);
		bk_call_failf(run->call, run->fail_status, 0, "%s", run->fail_msg);
		return;
	}
	resp.exit_code = run->exit_code;
	resp.signal = run->signal;
	resp.timed_out = run->timed_out;
	resp.oom_killed = run->oom_killed;
	resp.stdout = (ProtobufCBinaryData){ .len = run->out[0].len, .data = run->out[0].data };
	resp.stderr = (ProtobufCBinaryData){ .len = run->out[1].len, .data = run->out[1].data };
	resp.stdout_truncated = run->out[0].dropped > 0;
	resp.stderr_truncated = run->out[1].dropped > 0;
	resp.stdout_dropped = run->out[0].dropped;
	resp.stderr_dropped = run->out[1].dropped;
	resp.duration_us = bk_elapsed_us(&run->started);
	resp.isolation_profile = ex->srv->profile;
	bk_metrics_exec_finished(&ex->srv->metrics, resp.duration_us, resp.timed_out, resp.oom_killed, run->running);
	bk_call_reply(run->call, &resp.base);
}

/* Answer the runs retired meanwhile — sealing and sending outside the lock —, give back their
 * buffers and budget at once, and leave what remains of each to the I/O thread, which frees it
 * after its current batch (an event of that batch may still name one; a finished run's events
 * are ignored); nothing waits for that, so it is not woken for it. */
static void answer_retired(bk_execs *ex)
{
	struct exec_run *todo;

	pthread_mutex_lock(&ex->lock);
	todo = ex->retired;
	ex->retired = NULL;
	pthread_mutex_unlock(&ex->lock);
	if (!todo)
		return;
	for (struct exec_run *run = todo; run; run = run->next)
		run_answer(ex, run);
	pthread_mutex_lock(&ex->lock);
	while (todo) {
		struct exec_run *next = todo->next;
		run_release(ex, todo);
		todo->next = ex->dead;
		ex->dead = todo;
		todo = next;
	}
	pthread_mutex_unlock(&ex->lock);
}

/* The spawn failed (bk_command_spawn_failed: how it is told). A command that cannot be executed
 * is not a failed step: the exec's init reports it as a shell would, exit 127 or 126. Called with
 * the lock held. */
static void run_spawn_failed(bk_execs *ex, struct exec_run *run, int err, const bk_reply *reply)
{
	run->fail_status = bk_command_spawn_failed(ex->srv, run->cwd, err, reply, run->fail_msg, sizeof(run->fail_msg));
	run_retire(ex, run, RUN_FAILED);
}

/* The run is over (its exit came, and its output ended or the grace after the exit did): retired
 * for its answer. Called with the lock held. */
static void run_finish(bk_execs *ex, struct exec_run *run)
{
	run_retire(ex, run, run->fail_status ? RUN_FAILED : RUN_RESULT);
}

static void maybe_finish(bk_execs *ex, struct exec_run *run)
{
	if (run->exited && run->out[0].fd < 0 && run->out[1].fd < 0)
		run_finish(ex, run);
}

/* A kill that found its exec gone (ESRCH) is fine: its Exited event is on its way. */
static void kill_replied(void *arg, int err, bk_reply *reply, int *fds, size_t nfds)
{
	(void)fds;
	(void)nfds;
	if (err && err != ESRCH)
		bk_log(BK_LOG_ERROR, "exec: kill: %s", bk_link_why(arg, err, reply));
	bk_reply_free(reply);
}

/* Kill the exec's whole tree: its PID namespace dies with its init. */
static void run_kill(bk_execs *ex, struct exec_run *run)
{
	Boxkite__Executor__Kill kill = BOXKITE__EXECUTOR__KILL__INIT;
	bk_order order = BOXKITE__EXECUTOR__ORDER__INIT;

	kill.exec_id = run->id;
	order.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_KILL;
	order.kill = &kill;
	/* Urgent: a timeout fires whatever the load. */
	bk_link_send(ex->srv->executor, &order, NULL, 0, BK_LINK_URGENT, kill_replied, ex->srv->executor);
}

/* A run that cannot be watched or timed would never be answered: it is killed at once, and
 * answered this failure once its exit has come. Called with the lock held. */
static void run_break(bk_execs *ex, struct exec_run *run, const char *what)
{
	bk_log(BK_LOG_ERROR, "exec %llu: %s (%s): killing it", (unsigned long long)run->id, what, strerror(errno));
	snprintf(run->fail_msg, sizeof(run->fail_msg), "boxkited could not watch the command: %s: %s", what,
		 strerror(errno));
	run->fail_status = BK_INTERNAL;
	/* Its output is not read any more: as if at EOF. */
	unwatch_close(ex, &run->stdin_fd);
	unwatch_close(ex, &run->out[0].fd);
	unwatch_close(ex, &run->out[1].fd);
	unwatch_close(ex, &run->timer_fd);
	run_kill(ex, run);
}

/* fds: the command's stdin write end, stdout and stderr read ends, now the run's. */
static void run_started(bk_execs *ex, struct exec_run *run, const int *fds)
{
	struct itimerspec its = { .it_value = { .tv_sec = run->timeout_ms / 1000,
						.tv_nsec = (long)(run->timeout_ms % 1000) * 1000000 } };

	for (int i = 0; i < 3; i++)
		fcntl(fds[i], F_SETFL, fcntl(fds[i], F_GETFL) | O_NONBLOCK);
	bk_metrics_exec_started(&ex->srv->metrics);
	run->running = true;
	run->stdin_fd = fds[0];
	run->out[0].fd = fds[1];
	run->out[1].fd = fds[2];
	run->next = ex->runs;
	ex->runs = run;
	if (!run->stdin_len)
		run->stdin_fd = bk_close(run->stdin_fd);
	if ((run->stdin_fd >= 0 && watch(ex, run->stdin_fd, EPOLLOUT, run, WATCH_STDIN) < 0) ||
	    watch(ex, run->out[0].fd, EPOLLIN, run, WATCH_STDOUT) < 0 ||
	    watch(ex, run->out[1].fd, EPOLLIN, run, WATCH_STDERR) < 0) {
		run_break(ex, run, "epoll_ctl");
		return;
	}
	/* The timeout runs on the server's clock; a timer that cannot be made is not skipped. */
	run->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (run->timer_fd < 0 || timerfd_settime(run->timer_fd, 0, &its, NULL) < 0 ||
	    watch(ex, run->timer_fd, EPOLLIN, run, WATCH_TIMER) < 0)
		run_break(ex, run, "the timeout's timer");
}

/* Read what is there. Past the limit the bytes are read and counted, never kept: the command is
 * neither blocked on a full pipe nor killed for talking too much. last: the grace after the exit
 * is over, the stream ends with what is there now. */
static void output_read(bk_execs *ex, struct exec_run *run, struct output *o, bool last)
{
	for (;;) {
		ssize_t n;

		if (o->len < o->limit) {
			if (o->len == o->cap) {
				size_t cap = o->cap ? o->cap * 2 : OUTPUT_INITIAL;
				uint8_t *data;
				if (cap > o->limit)
					cap = o->limit;
				data = realloc(o->data, cap);
				if (!data)
					goto discard;
				o->data = data;
				o->cap = cap;
			}
			n = read(o->fd, o->data + o->len, o->cap - o->len);
			if (n > 0) {
				o->len += (size_t)n;
				continue;
			}
		} else {
		discard:
			n = read(o->fd, ex->discard, sizeof(ex->discard));
			if (n > 0) {
				o->dropped += (uint64_t)n;
				continue;
			}
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN && !last)
			return;
		/* EOF (or an error, which ends the stream the same way) */
		unwatch_close(ex, &o->fd);
		if (!last)
			maybe_finish(ex, run);
		return;
	}
}

static void stdin_write(bk_execs *ex, struct exec_run *run)
{
	while (run->stdin_off < run->stdin_len) {
		ssize_t n = write(run->stdin_fd, run->stdin_data + run->stdin_off, run->stdin_len - run->stdin_off);
		if (n > 0) {
			run->stdin_off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EAGAIN)
			return;
		break; /* EPIPE: the command stopped reading; the rest is not for it */
	}
	unwatch_close(ex, &run->stdin_fd);
}

static struct exec_run *run_find(bk_execs *ex, uint64_t id)
{
	for (struct exec_run *r = ex->runs; r; r = r->next)
		if (r->id == id)
			return r;
	return NULL;
}

static void on_event(bk_execs *ex, struct watch *w)
{
	struct exec_run *run = w->run;
	uint64_t expirations;

	if (run->finished)
		return;
	switch (w->kind) {
	case WATCH_STDIN:
		stdin_write(ex, run);
		break;
	case WATCH_STDOUT:
	case WATCH_STDERR:
		output_read(ex, run, &run->out[w->kind == WATCH_STDOUT ? 0 : 1], false);
		break;
	case WATCH_TIMER:
		if (read(run->timer_fd, &expirations, sizeof(expirations)) < 0 && errno == EAGAIN)
			break;
		unwatch_close(ex, &run->timer_fd);
		if (run->exited) {
			/* The grace after the exit is over: what the pipes hold now, then the answer. */
			for (int i = 0; i < 2; i++)
				if (run->out[i].fd >= 0)
					output_read(ex, run, &run->out[i], true);
			run_finish(ex, run);
			break;
		}
		run->timed_out = true;
		run_kill(ex, run);
		break;
	}
}

static void *io_main(void *arg)
{
	bk_execs *ex = arg;

	for (;;) {
		struct epoll_event evs[64];
		int n = epoll_wait(ex->epfd, evs, 64, -1);
		bool stop;

		pthread_mutex_lock(&ex->lock);
		for (int i = 0; i < n; i++) {
			if (evs[i].data.ptr == &wake_watch) {
				uint64_t count;
				if (read(ex->wake_fd, &count, sizeof(count)) < 0 && errno != EAGAIN)
					bk_log(BK_LOG_ERROR, "exec: wake-up read: %s", strerror(errno));
			} else {
				on_event(ex, evs[i].data.ptr);
			}
		}
		while (ex->dead) {
			struct exec_run *next = ex->dead->next;
			run_free(ex, ex->dead);
			ex->dead = next;
		}
		stop = ex->stopping;
		pthread_mutex_unlock(&ex->lock);
		answer_retired(ex);
		if (stop)
			return NULL;
	}
}

int bk_execs_start(bk_server *srv, bk_error **err)
{
	bk_execs *ex = calloc(1, sizeof(*ex));
	int rv;

	if (!ex)
		return bk_error_errno(err, ENOMEM, "exec");
	srv->execs = ex;
	ex->srv = srv;
	pthread_mutex_init(&ex->lock, NULL);
	atomic_init(&ex->next_id, 1);
	ex->epfd = epoll_create1(EPOLL_CLOEXEC);
	ex->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (ex->epfd < 0 || ex->wake_fd < 0 ||
	    epoll_ctl(ex->epfd, EPOLL_CTL_ADD, ex->wake_fd,
		      &(struct epoll_event){ .events = EPOLLIN, .data.ptr = &wake_watch }) < 0)
		return bk_error_errno(err, errno, "exec I/O set-up");
	rv = pthread_create(&ex->thread, NULL, io_main, ex);
	if (rv)
		return bk_error_errno(err, rv, "exec I/O thread");
	ex->thread_started = true;
	return 0;
}

void bk_execs_stop(bk_server *srv)
{
	bk_execs *ex = srv->execs;

	if (!ex)
		return;
	if (ex->thread_started) {
		pthread_mutex_lock(&ex->lock);
		ex->stopping = true;
		wake(ex);
		pthread_mutex_unlock(&ex->lock);
		pthread_join(ex->thread, NULL);
	}
	answer_retired(ex);
	/* Calls still open are answered: the server is going away, their commands with it. */
	while (ex->runs) {
		struct exec_run *run = ex->runs;
		ex->runs = run->next;
		bk_call_failf(run->call, BK_UNAVAILABLE, 0, "boxkited is shutting down");
		run_free(ex, run);
	}
	while (ex->dead) {
		struct exec_run *next = ex->dead->next;
		run_free(ex, ex->dead);
		ex->dead = next;
	}
	bk_close(ex->epfd);
	bk_close(ex->wake_fd);
	pthread_mutex_destroy(&ex->lock);
	free(ex);
	srv->execs = NULL;
}
