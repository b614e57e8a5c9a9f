#include "runs/exec.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "boundary/command.h"
#include "clock.h"
#include "log.h"
#include "runs/runs.h"

/* One Exec: a run of the engine's whose two rings keep the head of each stream (its limits), its
 * timeout a deadline, answered once with an ExecResponse. */
struct exec_run {
	bk_run run;                /* first: the engine's part */
	bk_outbox_item answer;
	struct exec_run *next;     /* in bk_execs.runs until answered */
	bool posted;               /* its answer is made: only sending it is left */
	bk_call *call;
	const char *cwd;           /* as the request named it, for its error (in the request, which
				    * lives as long as the call) */
	const uint8_t *stdin_data; /* in the request too */
	size_t stdin_len;
	uint32_t timeout_ms;
	struct timespec started;
	bool running;              /* counted in the metrics' running execs (it started) */
	bool timed_out;
	size_t reserved;           /* of bk_execs.output_reserved */
	int fail_status;           /* the call fails: its status and message */
	char fail_msg[512];
};

/* Under the engine's lock. */
struct bk_execs {
	bk_server *srv;
	bk_runs *rs;
	struct exec_run *runs;     /* not answered yet */
	bool stopping;
	/* Buffers: what every exec admitted may fill, its two streams' limits, and the stdin its
	 * request holds, taken from --exec-output-budget when it is admitted and given back once it
	 * is answered. Past the budget an exec is refused at once, RESOURCE_EXHAUSTED: the front's
	 * memory is bounded, its OOM is never how the sidecar says "too much". */
	size_t output_reserved;
};

static struct exec_run *exec_of(bk_run *run)
{
	return (struct exec_run *)((char *)run - offsetof(struct exec_run, run));
}

static void post_fail(struct exec_run *e, int status, const char *fmt, ...) BK_PRINTF(3, 4);
static void post_fail(struct exec_run *e, int status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(e->fail_msg, sizeof(e->fail_msg), fmt, ap);
	va_end(ap);
	e->fail_status = status;
	e->posted = true;
	bk_runs_post(e->run.rs, &e->answer);
}

/* The answer, once the lock is let go: the run has ended (nothing touches its rings any more) or
 * failed. The record, its place in the list and its budget are given back first, under the lock,
 * keeping the rings and what the answer says: once the call is answered nothing of the engine's
 * or of Exec's is touched, so the stop (after the front's, which waits for every call) can free
 * them. */
static void exec_send(bk_outbox_item *item)
{
	struct exec_run *e = (struct exec_run *)((char *)item - offsetof(struct exec_run, answer));
	Boxkite__V1__ExecResponse resp = BOXKITE__V1__EXEC_RESPONSE__INIT;
	bk_call *call = e->call;
	bk_server *srv = call->srv;
	bk_execs *ex = srv->execs;
	_cleanup_(bk_ring_freep) bk_ring *out = TAKE_PTR(e->run.out[0].ring);
	_cleanup_(bk_ring_freep) bk_ring *err = TAKE_PTR(e->run.out[1].ring);
	bool running = e->running;
	int fail_status = e->fail_status;
	char fail_msg[sizeof(e->fail_msg)];
	size_t out_len = 0, err_len = 0;
	const uint8_t *out_data = out ? bk_ring_peek(out, 0, &out_len) : NULL;
	const uint8_t *err_data = err ? bk_ring_peek(err, 0, &err_len) : NULL;

	memcpy(fail_msg, e->fail_msg, sizeof(fail_msg));
	resp.exit_code = e->run.exit_code;
	resp.signal = e->run.signal;
	resp.timed_out = e->timed_out;
	resp.oom_killed = e->run.oom_killed;
	resp.duration_us = bk_elapsed_us(&e->started);
	bk_runs_lock(ex->rs);
	for (struct exec_run **pp = &ex->runs; *pp; pp = &(*pp)->next) {
		if (*pp == e) {
			*pp = e->next;
			break;
		}
	}
	ex->output_reserved -= e->reserved;
	bk_run_free(&e->run);
	bk_runs_unlock(ex->rs);

	if (fail_status) {
		/* One that started and could not be watched still leaves the running count. */
		if (running)
			bk_metrics_exec_finished(&srv->metrics, resp.duration_us, false, false, true);
		bk_call_failf(call, fail_status, 0, "%s", fail_msg);
		return;
	}
	resp.stdout = (ProtobufCBinaryData){ .len = out_len, .data = (uint8_t *)out_data };
	resp.stderr = (ProtobufCBinaryData){ .len = err_len, .data = (uint8_t *)err_data };
	resp.stdout_dropped = bk_ring_lost(out);
	resp.stderr_dropped = bk_ring_lost(err);
	resp.stdout_truncated = resp.stdout_dropped > 0;
	resp.stderr_truncated = resp.stderr_dropped > 0;
	resp.isolation_profile = srv->profile;
	bk_metrics_exec_finished(&srv->metrics, resp.duration_us, resp.timed_out, resp.oom_killed, running);
	bk_call_reply(call, &resp.base);
}

/* --- the engine's operations ----------------------------------------------------------------- */

static void exec_spawned(bk_run *run, int err, const bk_reply *reply)
{
	struct exec_run *e = exec_of(run);
	bk_server *srv = e->call->srv;

	if (run->started) {
		bk_metrics_exec_started(&srv->metrics);
		e->running = true;
	}
	if (err == ECANCELED) {
		post_fail(e, BK_UNAVAILABLE, "boxkited is shutting down");
	} else if (err && run->started) {
		post_fail(e, BK_INTERNAL, "boxkited could not watch the command: epoll_ctl: %s", strerror(err));
	} else if (err) {
		/* A command that cannot be executed is not a failed step: the exec's init reports it
		 * as a shell would, exit 127 or 126 (bk_command_spawn_failed says how it is told). */
		e->fail_status = bk_command_spawn_failed(srv, e->cwd, err, reply, e->fail_msg, sizeof(e->fail_msg));
		e->posted = true;
		bk_runs_post(run->rs, &e->answer);
	} else {
		/* The timeout runs on the server's clock, from the start. */
		bk_run_due(run, bk_clock_monotonic_ms() + e->timeout_ms);
		if (e->stdin_len)
			bk_run_stdin_write(run, e->stdin_data, e->stdin_len, true);
	}
}

static void exec_ended(bk_run *run)
{
	struct exec_run *e = exec_of(run);

	e->posted = true;
	bk_runs_post(run->rs, &e->answer);
}

/* The timeout: the whole tree killed (its PID namespace dies with its init), partial output
 * kept; the answer comes once its exit has. */
static void exec_due(bk_run *run, int64_t now)
{
	(void)now;
	run->due = 0;
	exec_of(run)->timed_out = true;
	bk_run_signal(run, SIGKILL, NULL, NULL);
}

static void exec_free(bk_run *run)
{
	free(exec_of(run));
}

static const bk_run_ops exec_ops = {
	.spawned = exec_spawned,
	.ended = exec_ended,
	.due = exec_due,
	.free = exec_free,
};

/* --- the handler (an nng callback thread) ---------------------------------------------------- */

void bk_handle_exec(bk_call *call, const ProtobufCMessage *request)
{
	const Boxkite__V1__ExecRequest *rq = (const Boxkite__V1__ExecRequest *)request;
	bk_server *srv = call->srv;
	const bk_config *cfg = &srv->cfg;
	bk_execs *ex = srv->execs;
	const bk_command_request crq = { rq->n_argv, rq->argv, rq->shell,	    rq->cwd,
					 rq->n_env,  rq->env,  rq->n_allow_net, rq->allow_net };
	_cleanup_(bk_command_fini) bk_command cmd = { 0 };
	size_t limit[2], reserved, budget_used;
	struct exec_run *e;
	bool fits;

	if (!srv->executor || !ex) {
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
	/* The command runs for as long as it takes, and its call waits without holding one of the
	 * front's receiving contexts; one that cannot (BK_PARKED_MAX calls wait already) would hold
	 * one for up to its timeout, and a few of them every context Health needs: refused. */
	if (!bk_call_park(call)) {
		bk_call_failf(call, BK_RESOURCE_EXHAUSTED, 0,
			      "%d calls wait already, the most boxkited keeps waiting: retry when some have ended",
			      BK_PARKED_MAX);
		return;
	}
	limit[0] = rq->stdout_limit ? rq->stdout_limit : cfg->exec_output;
	limit[1] = rq->stderr_limit ? rq->stderr_limit : cfg->exec_output;
	/* Its stdin too: the request that carries it is held until the answer (up to 8 MiB each,
	 * and a call that waits holds no context: only the budget bounds how many). */
	reserved = limit[0] + limit[1] + rq->stdin.len;
	e = calloc(1, sizeof(*e));
	if (!e) {
		bk_call_failf(call, BK_RESOURCE_EXHAUSTED, 0, "out of memory");
		return;
	}
	clock_gettime(CLOCK_MONOTONIC, &e->started);
	e->run.ops = &exec_ops;
	e->run.keep_stdin = rq->stdin.len > 0;
	e->answer.send = exec_send;
	e->call = call;
	e->cwd = cmd.cwd_asked;
	e->timeout_ms = rq->timeout_ms ? rq->timeout_ms : (uint32_t)cfg->exec_timeout_ms;
	e->stdin_data = rq->stdin.data;
	e->stdin_len = rq->stdin.len;
	bk_runs_lock(ex->rs);
	budget_used = ex->output_reserved;
	fits = !ex->stopping && budget_used + reserved <= cfg->exec_output_budget;
	if (fits) {
		ex->output_reserved += reserved;
		e->reserved = reserved;
		e->next = ex->runs;
		ex->runs = e;
	}
	bk_runs_unlock(ex->rs);
	if (!fits) {
		if (ex->stopping)
			bk_call_failf(call, BK_UNAVAILABLE, 0, "boxkited is shutting down");
		else
			bk_call_failf(call, BK_RESOURCE_EXHAUSTED, 0,
				      "the output and stdin of the execs running may fill %zu of the %zu bytes boxkited "
				      "buffers (--exec-output-budget), and this one's %zu do not fit: retry, or ask for less "
				      "output",
				      budget_used, cfg->exec_output_budget, reserved);
		free(e);
		return;
	}
	/* Buffers grow as output comes (ring.h): nothing of the limits is allocated yet. */
	if (bk_run_init(&e->run, ex->rs, BK_RING_KEEP_HEAD, limit[0], limit[1], false) < 0) {
		bk_runs_lock(ex->rs);
		post_fail(e, BK_RESOURCE_EXHAUSTED, "out of memory");
		bk_runs_unlock(ex->rs);
		return;
	}
	bk_run_spawn(&e->run, &cmd.spawn);
}

/* --- lifecycle ------------------------------------------------------------------------------- */

int bk_execs_start(bk_server *srv, bk_error **err)
{
	bk_execs *ex = calloc(1, sizeof(*ex));

	if (!ex)
		return bk_error_errno(err, ENOMEM, "exec");
	ex->srv = srv;
	ex->rs = srv->runs;
	srv->execs = ex;
	return 0;
}

void bk_execs_stop(bk_server *srv)
{
	bk_execs *ex = srv->execs;

	if (!ex)
		return;
	/* Calls still open are answered: the server is going away, their commands with it. One whose
	 * Spawn is still out is answered when its answer comes (exec_spawned, ECANCELED). */
	bk_runs_lock(ex->rs);
	ex->stopping = true;
	for (struct exec_run *e = ex->runs; e; e = e->next) {
		if (e->posted)
			continue;
		bk_run_drop(&e->run);
		if (!e->run.spawning)
			post_fail(e, BK_UNAVAILABLE, "boxkited is shutting down");
	}
	bk_runs_unlock(ex->rs);
}

void bk_execs_free(bk_server *srv)
{
	free(srv->execs);
	srv->execs = NULL;
}
