#include "runs/process.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <termios.h>
#include <unistd.h>

#include "boundary/command.h"
#include "clock.h"
#include "log.h"
#include "runs/runs.h"

#define TAG_MAX 256
/* A read is answered once room for this much of what it asks (or all of it, if less) is free in
 * the answer budget: not a trickle of small answers while the budget is nearly taken. */
#define ANSWER_MIN (64u << 10)

enum call_kind { CALL_START, CALL_READ, CALL_WAIT, CALL_WRITE };

/* A call about a process that is answered from the engine's lock: one that waits (a long-poll,
 * a write the process has not taken yet) or the start, and its answer, made here in advance so
 * that answering never needs memory it might not get. */
struct waiter {
	bk_run_waiter wait;      /* on the run, while it waits */
	bk_outbox_item item;     /* its answer, once made */
	bk_processes *ps;
	bk_call *call;
	enum call_kind kind;
	uint64_t off[2];
	uint32_t max_bytes;
	bool marks;              /* a read that asked for its chunks' marks */
	/* the answer: failed (fail_status), a read's (made with its data: answer), or the response
	 * below */
	bk_answer *answer;
	uint8_t *data;           /* in answer: stdout's chunk[0].length bytes, then stderr's */
	int fail_status;
	char fail_msg[192];
	size_t counted;          /* of the answer budget: its data, until its connection has it */
	char id[24];
	Boxkite__V1__ProcessStatus status;
	Boxkite__V1__StreamChunk chunk[2];
	Boxkite__V1__ProcessStartResponse start;
	Boxkite__V1__ProcessReadResponse read;
	Boxkite__V1__ProcessWaitResponse wait_resp;
	Boxkite__V1__ProcessWriteResponse write;
};

struct proc {
	bk_run run;              /* first: the engine's part */
	struct proc *next;       /* in bk_processes.procs, oldest first */
	char name[24];           /* "p<n>": the process id clients use */
	char **argv;             /* as started, for the list; one allocation */
	size_t argc;
	char *tag;
	char *cwd_asked;         /* for the start's error */
	uint32_t expose_port;
	struct waiter *start;    /* the start's call, until the executor answered the Spawn */
	bool runtime_exceeded, lease_expired;
	struct timespec started;
	int64_t started_wall_ms;
	uint64_t duration_us;    /* once exited */
	int64_t runtime_at, kill_at; /* deadlines (monotonic ms), 0: none */
	int64_t lease_ms, seen_ms;
	size_t reserved;         /* of the ring budget */
	bool reset_kills;        /* it ran when a reset began: killed by it, its waiting calls ABORTED */
};

/* Under the engine's lock. */
struct bk_processes {
	bk_server *srv;
	bk_runs *rs;
	bool stopping;
	struct proc *procs, **tail;
	unsigned count;
	size_t ring_reserved;
	uint64_t names;          /* the last name given (p1, p2...): a tenant's count, from 1 again after a
				  * Reset (exec ids are the engine's, never reused) */
	uint64_t epoch;          /* what the names are names in: random, new at the start and at each
				  * Reset, so that a call for p1 of before never reaches the p1 of now */
	/* Read answers made and not yet taken by their connection (BK_PROCESS_ANSWER_BUDGET): a
	 * write that wakes every reader of a process makes them within it, not one copy each at
	 * once. starved: a read that has its bytes waits for room. */
	size_t answer_bytes;
	bool starved;
};

static struct proc *proc_of(bk_run *run)
{
	return (struct proc *)((char *)run - offsetof(struct proc, run));
}

/* A new epoch: random (it tells the next tenant nothing of the last), never 0 (a request's "any")
 * nor the one before. */
static void epoch_renew(bk_processes *ps)
{
	uint64_t next = 0;

	while (next == 0 || next == ps->epoch) {
		if (getrandom(&next, sizeof(next), 0) != (ssize_t)sizeof(next)) {
			/* Not for 8 bytes once the kernel's pool is ready, which boxkited's start
			 * waited for (its keys, the replay cache's seed). */
			bk_log(BK_LOG_ERROR, "processes: getrandom: %s", strerror(errno));
			next = ps->epoch ^ (uint64_t)bk_clock_monotonic_ms() ^ 0x9e3779b97f4a7c15ull;
		}
	}
	ps->epoch = next;
}

/* --- records --------------------------------------------------------------------------------- */

static struct proc *proc_find(bk_processes *ps, const char *name)
{
	for (struct proc *p = ps->procs; p; p = p->next)
		if (strcmp(p->name, name) == 0)
			return p;
	return NULL;
}

static bool proc_running(const struct proc *p)
{
	return p->run.started && !p->run.exited;
}

/* Its exit came and both streams are at their end: nothing about it changes any more. */
static bool proc_ended(const struct proc *p)
{
	return p->run.exited && p->run.out[0].eof && p->run.out[1].eof;
}

static void proc_free(struct proc *p)
{
	free(p->start);
	free(p->argv);
	free(p->tag);
	free(p->cwd_asked);
	free(p);
}

static void fill_status(const struct proc *p, Boxkite__V1__ProcessStatus *st)
{
	*st = (Boxkite__V1__ProcessStatus)BOXKITE__V1__PROCESS_STATUS__INIT;
	st->running = !p->run.exited;
	st->exit_code = p->run.exit_code;
	st->signal = p->run.signal;
	st->runtime_exceeded = p->runtime_exceeded;
	st->lease_expired = p->lease_expired;
	st->oom_killed = p->run.oom_killed;
	st->duration_us = p->run.exited ? p->duration_us : bk_elapsed_us(&p->started);
}

/* --- answers: made under the lock, sent once it is let go ------------------------------------ */

/* The room a read's answer may take now: at most want bytes. */
static size_t answer_room(const bk_processes *ps, size_t want)
{
	size_t room = ps->answer_bytes < BK_PROCESS_ANSWER_BUDGET ? BK_PROCESS_ANSWER_BUDGET - ps->answer_bytes : 0;

	return want < room ? want : room;
}

/* A read's answer is its connection's now (or was dropped): its bytes leave the budget, and the
 * reads that waited for room are asked again. */
static void answer_sent(void *arg)
{
	struct waiter *w = arg;
	bk_processes *ps = w->ps;

	bk_runs_lock(ps->rs);
	ps->answer_bytes -= w->counted;
	if (ps->starved) {
		ps->starved = false;
		bk_runs_recheck(ps->rs);
	}
	bk_runs_unlock(ps->rs);
	free(w);
}

static void waiter_send(bk_outbox_item *item)
{
	struct waiter *w = (struct waiter *)((char *)item - offsetof(struct waiter, item));
	/* Counted until the transport is done with the answer: answer_sent frees w then, on the
	 * transport's thread, maybe before the call below returns — w is not touched after it. */
	bool counted = w->counted > 0;
	bk_digest digest;

	if (counted)
		bk_call_on_sent(w->call, answer_sent, w);
	if (w->fail_status) {
		bk_call_failf(w->call, w->fail_status, 0, "%s", w->fail_msg);
	} else if (w->kind == CALL_READ) {
		/* The one hash of these bytes on this side: the answer's MAC covers it. */
		if (bk_digest_of(w->data, (size_t)w->chunk[0].length + w->chunk[1].length, &digest) < 0) {
			bk_call_answer_drop(w->answer);
			bk_call_failf(w->call, BK_INTERNAL, 0, "SHA-256 failed in libcrypto");
		} else {
			bk_call_reply_data(w->call, w->answer, &digest);
		}
	} else if (w->kind == CALL_WAIT) {
		bk_call_reply(w->call, &w->wait_resp.base);
	} else if (w->kind == CALL_WRITE) {
		bk_call_reply(w->call, &w->write.base);
	} else {
		bk_call_reply(w->call, &w->start.base);
	}
	if (!counted)
		free(w);
}

static struct waiter *waiter_new(bk_call *call, enum call_kind kind)
{
	struct waiter *w = calloc(1, sizeof(*w));

	if (!w) {
		bk_call_failf(call, BK_RESOURCE_EXHAUSTED, 0, "out of memory");
		return NULL;
	}
	w->ps = call->srv->processes;
	w->call = call;
	w->kind = kind;
	w->item.send = waiter_send;
	return w;
}

static void post(bk_processes *ps, struct waiter *w)
{
	bk_runs_post(ps->rs, &w->item);
}

static void post_fail(bk_processes *ps, struct waiter *w, int status, const char *fmt, ...) BK_PRINTF(4, 5);
static void post_fail(bk_processes *ps, struct waiter *w, int status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(w->fail_msg, sizeof(w->fail_msg), fmt, ap);
	va_end(ap);
	w->fail_status = status;
	post(ps, w);
}

/* A chunk's marks (asked for), in room made for them: 0, or -ENOMEM. */
static int chunk_marks(const bk_marks *m, Boxkite__V1__StreamChunk *c, Boxkite__V1__OutputMark **room,
		       Boxkite__V1__OutputMark ***ptrs)
{
	size_t from = 0, n = c->length && m ? bk_marks_find(m, c->offset, c->length, &from) : 0;

	if (!n)
		return 0;
	*room = calloc(n, sizeof(**room));
	*ptrs = calloc(n, sizeof(**ptrs));
	if (!*room || !*ptrs)
		return -ENOMEM;
	for (size_t k = 0; k < n; k++) {
		const bk_mark *mk = bk_marks_at(m, from + k);
		(*room)[k] = (Boxkite__V1__OutputMark)BOXKITE__V1__OUTPUT_MARK__INIT;
		(*room)[k].offset = mk->offset;
		(*room)[k].seq = mk->seq;
		(*room)[k].time_ms = mk->time_ms;
		(*ptrs)[k] = &(*room)[k];
	}
	c->n_marks = n;
	c->marks = *ptrs;
	return 0;
}

/* What a read would carry from where each ring is now: each stream's chunk (offset, lost, end)
 * and its kept bytes from there, up to max_bytes (n); the sum. */
static size_t read_extent(const struct proc *p, struct waiter *w, size_t n[2])
{
	for (int i = 0; i < 2; i++) {
		const bk_ring *r = p->run.out[i].ring;
		Boxkite__V1__StreamChunk *c = &w->chunk[i];
		uint64_t off = w->off[i];

		*c = (Boxkite__V1__StreamChunk)BOXKITE__V1__STREAM_CHUNK__INIT;
		if (off < bk_ring_first(r)) {
			c->lost = bk_ring_first(r) - off;
			off = bk_ring_first(r);
		}
		n[i] = bk_ring_last(r) - off < w->max_bytes ? (size_t)(bk_ring_last(r) - off) : w->max_bytes;
		c->offset = off;
		c->end = bk_ring_end(r);
	}
	return n[0] + n[1];
}

/* Whether the read's answer would get room enough now (ANSWER_MIN, or all it carries). */
static bool read_has_room(const bk_processes *ps, const struct proc *p, struct waiter *w)
{
	size_t n[2], want = read_extent(p, w, n);
	size_t need = want < ANSWER_MIN ? want : ANSWER_MIN;

	return answer_room(ps, want) >= need;
}

/* What the read asked for, from where each ring is now, as far as the answer budget has room:
 * its bytes copied from the rings straight into the answer's data field (the rings move on once
 * the lock is let go), hashed and signed outside the lock (waiter_send). A read that carries none
 * of the bytes there are for want of room, or that could not wait (retry_after_ms), tells its
 * caller when to ask again. */
static void post_read(bk_processes *ps, struct proc *p, struct waiter *w, uint32_t retry_after_ms)
{
	size_t n[2], want = read_extent(p, w, n), room = answer_room(ps, want);

	/* stdout first: a terminal's, and most commands' talk */
	if (n[0] > room)
		n[0] = room;
	if (n[1] > room - n[0])
		n[1] = room - n[0];
	if (want && !n[0] && !n[1])
		retry_after_ms = BK_PROCESS_RETRY_AFTER_MS;
	w->read = (Boxkite__V1__ProcessReadResponse)BOXKITE__V1__PROCESS_READ_RESPONSE__INIT;
	fill_status(p, &w->status);
	w->read.stdout = &w->chunk[0];
	w->read.stderr = &w->chunk[1];
	w->read.status = &w->status;
	w->read.retry_after_ms = retry_after_ms;
	w->read.epoch = ps->epoch;
	for (int attempt = 0; attempt < 2 && !w->answer; attempt++) {
		Boxkite__V1__OutputMark *mark_room[2] = { NULL, NULL }, **ptrs[2] = { NULL, NULL };
		bool ok = true;

		/* Without memory for the bytes (or their marks): none this time, the caller asks again
		 * from the same offsets; without memory for an answer at all: the call fails. */
		if (attempt)
			n[0] = n[1] = 0;
		for (int i = 0; i < 2; i++) {
			w->chunk[i].length = (uint32_t)n[i];
			w->chunk[i].eof = p->run.out[i].eof && w->chunk[i].offset + n[i] == w->chunk[i].end;
			w->chunk[i].n_marks = 0;
			w->chunk[i].marks = NULL;
			if (w->marks && ok)
				ok = chunk_marks(p->run.out[i].marks, &w->chunk[i], &mark_room[i], &ptrs[i]) == 0;
		}
		/* The answer's message is laid out now: the marks' room is not needed after. */
		if (ok)
			w->answer = bk_call_answer(w->call, &w->read.base, n[0] + n[1], &w->data);
		for (int i = 0; i < 2; i++) {
			free(mark_room[i]);
			free(ptrs[i]);
			w->chunk[i].n_marks = 0;
			w->chunk[i].marks = NULL;
		}
	}
	if (!w->answer) {
		post_fail(ps, w, BK_RESOURCE_EXHAUSTED, "out of memory for the answer");
		return;
	}
	if (n[0])
		bk_ring_copy(p->run.out[0].ring, w->chunk[0].offset, w->data, n[0]);
	if (n[1])
		bk_ring_copy(p->run.out[1].ring, w->chunk[1].offset, w->data + n[0], n[1]);
	w->counted = n[0] + n[1];
	ps->answer_bytes += w->counted;
	post(ps, w);
}

static void post_wait(bk_processes *ps, struct proc *p, struct waiter *w, uint32_t retry_after_ms)
{
	w->wait_resp = (Boxkite__V1__ProcessWaitResponse)BOXKITE__V1__PROCESS_WAIT_RESPONSE__INIT;
	fill_status(p, &w->status);
	w->wait_resp.status = &w->status;
	w->wait_resp.retry_after_ms = retry_after_ms;
	w->wait_resp.epoch = ps->epoch;
	post(ps, w);
}

static void post_written(bk_processes *ps, struct waiter *w, size_t written, uint32_t retry_after_ms)
{
	w->write = (Boxkite__V1__ProcessWriteResponse)BOXKITE__V1__PROCESS_WRITE_RESPONSE__INIT;
	w->write.written = written;
	w->write.retry_after_ms = retry_after_ms;
	post(ps, w);
}

/* A write whose stdin is done with it: what went in, or why not all. */
static void post_write_over(bk_processes *ps, struct proc *p, struct waiter *w)
{
	const bk_run_stdin *in = &p->run.in;

	if (in->err == EPIPE)
		post_fail(ps, w, BK_FAILED_PRECONDITION, "the process closed its stdin (%zu of %zu bytes written)", in->off,
			  in->len);
	else if (in->err == ESRCH)
		post_fail(ps, w, BK_FAILED_PRECONDITION, "the process ended (%zu of %zu bytes written)", in->off, in->len);
	else
		post_written(ps, w, in->off, 0);
}

/* Whether a read has something to return: bytes past an offset (or lost before it), or the end
 * of everything. */
static bool read_ready(const struct proc *p, const struct waiter *w)
{
	for (int i = 0; i < 2; i++) {
		const bk_ring *r = p->run.out[i].ring;
		if (w->off[i] < bk_ring_end(r) || w->off[i] < bk_ring_first(r))
			return true;
	}
	return proc_ended(p);
}

/* --- the engine's operations ----------------------------------------------------------------- */

/* The next of the process's own deadlines: its runtime, a kill after a signal's grace, its lease
 * (which only runs while no call of its client is present). */
static int64_t proc_next_due(const struct proc *p)
{
	int64_t next = 0;
	int64_t lease = p->lease_ms && !p->run.waiters ? p->seen_ms + p->lease_ms : 0;

	if (p->runtime_at)
		next = p->runtime_at;
	if (p->kill_at && (!next || p->kill_at < next))
		next = p->kill_at;
	if (lease && (!next || lease < next))
		next = lease;
	return next;
}

/* Off the list, its budget given back, its run ended and given back. */
static void proc_remove(bk_processes *ps, struct proc *p)
{
	for (struct proc **pp = &ps->procs; *pp; pp = &(*pp)->next) {
		if (*pp == p) {
			*pp = p->next;
			if (ps->tail == &p->next)
				ps->tail = pp;
			break;
		}
	}
	ps->count--;
	ps->ring_reserved -= p->reserved;
	bk_run_drop(&p->run);
	bk_run_free(&p->run);
}

static void proc_spawned(bk_run *run, int err, const bk_reply *reply)
{
	struct proc *p = proc_of(run);
	struct waiter *w = TAKE_PTR(p->start);
	bk_processes *ps = w->call->srv->processes;

	if (err == ECANCELED) {
		/* A reset or the stop came first: it does not run (drop_all took it off the list). */
		post_fail(ps, w, ps->stopping ? BK_UNAVAILABLE : BK_ABORTED, "%s",
			  ps->stopping ? "boxkited is shutting down" : "the sandbox was reset");
		bk_run_free(run);
	} else if (err && run->started) {
		/* Unwatched, its output would never be read: it does not run at all (killed). */
		post_fail(ps, w, BK_INTERNAL, "boxkited could not watch the process: %s", strerror(err));
		proc_remove(ps, p);
	} else if (err) {
		w->fail_status = bk_command_spawn_failed(ps->srv, p->cwd_asked, err, reply, w->fail_msg, sizeof(w->fail_msg));
		post(ps, w);
		proc_remove(ps, p);
	} else {
		p->seen_ms = bk_clock_monotonic_ms();
		bk_run_due(run, proc_next_due(p));
		bk_log(BK_LOG_INFO, "process %s started%s", p->name, p->expose_port ? " (exposing a port)" : "");
		snprintf(w->id, sizeof(w->id), "%s", p->name);
		w->start.process_id = w->id;
		w->start.isolation_profile = ps->srv->profile;
		w->start.epoch = ps->epoch;
		post(ps, w);
	}
}

static void proc_exited(bk_run *run, int64_t now)
{
	struct proc *p = proc_of(run);

	(void)now;
	p->duration_us = bk_elapsed_us(&p->started);
	bk_log(BK_LOG_INFO, "process %s ended: exit %d, signal %d%s%s%s", p->name, run->exit_code, run->signal,
	       p->runtime_exceeded ? ", runtime exceeded" : "", p->lease_expired ? ", lease expired" : "",
	       run->oom_killed ? ", OOM" : "");
}

/* Its runtime, a kill after a signal's grace, its lease. */
static void proc_due(bk_run *run, int64_t now)
{
	struct proc *p = proc_of(run);

	if (proc_running(p)) {
		if (p->runtime_at && now >= p->runtime_at) {
			p->runtime_at = 0;
			p->runtime_exceeded = true;
			bk_run_signal(run, SIGKILL, NULL, NULL);
		}
		if (p->kill_at && now >= p->kill_at) {
			p->kill_at = 0;
			bk_run_signal(run, SIGKILL, NULL, NULL);
		}
		if (p->lease_ms && !run->waiters && now >= p->seen_ms + p->lease_ms) {
			p->lease_ms = 0;
			p->lease_expired = true;
			bk_log(BK_LOG_INFO, "process %s: its lease ran out: killed", p->name);
			bk_run_signal(run, SIGKILL, NULL, NULL);
		}
	}
	run->due = proc_running(p) ? proc_next_due(p) : 0;
}

/* A call of the process's client is answered: it was present now, for its lease. */
static bool proc_answer(bk_run *run, bk_run_waiter *bw, int64_t now, bool due)
{
	struct proc *p = proc_of(run);
	struct waiter *w = (struct waiter *)((char *)bw - offsetof(struct waiter, wait));
	bk_processes *ps = w->ps;

	if (p->reset_kills) {
		/* Killed by a reset: its end is the reset's doing, not an answer to what it waited for. */
		if (w->kind == CALL_WRITE && run->in.busy)
			bk_run_stdin_cancel(run);
		post_fail(ps, w, BK_ABORTED, "the sandbox was reset");
		return true;
	}
	switch (w->kind) {
	case CALL_READ:
		if (!due && !read_ready(p, w))
			return false;
		if (!due && !read_has_room(ps, p, w)) {
			ps->starved = true;
			return false;
		}
		post_read(ps, p, w, 0);
		break;
	case CALL_WAIT:
		if (!due && !run->exited)
			return false;
		post_wait(ps, p, w, 0);
		break;
	case CALL_WRITE:
		if (run->in.busy && !due)
			return false;
		if (run->in.busy) {
			/* The process is not reading: what went in is answered, the rest is the
			 * caller's. */
			post_written(ps, w, bk_run_stdin_cancel(run), 0);
		} else {
			post_write_over(ps, p, w);
		}
		break;
	default:
		return false;
	}
	p->seen_ms = now;
	if (p->lease_ms)
		bk_run_due(run, now + p->lease_ms);
	return true;
}

static void proc_release(bk_run *run)
{
	proc_free(proc_of(run));
}

static const bk_run_ops proc_ops = {
	.spawned = proc_spawned,
	.exited = proc_exited,
	.due = proc_due,
	.answer = proc_answer,
	.free = proc_release,
};

/* --- start ----------------------------------------------------------------------------------- */

static char **argv_copy(size_t n, char *const *argv)
{
	size_t bytes = (n + 1) * sizeof(char *);
	char **out, *at;

	for (size_t i = 0; i < n; i++)
		bytes += strlen(argv[i]) + 1;
	out = malloc(bytes);
	if (!out)
		return NULL;
	at = (char *)(out + n + 1);
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(argv[i]) + 1;
		memcpy(at, argv[i], len);
		out[i] = at;
		at += len;
	}
	out[n] = NULL;
	return out;
}

void bk_handle_process_start(bk_call *call, const ProtobufCMessage *request)
{
	const Boxkite__V1__ProcessStartRequest *rq = (const Boxkite__V1__ProcessStartRequest *)request;
	bk_server *srv = call->srv;
	const bk_config *cfg = &srv->cfg;
	bk_processes *ps = srv->processes;
	const bk_command_request crq = { rq->n_argv, rq->argv, rq->shell,	    rq->cwd,
					 rq->n_env,  rq->env,  rq->n_allow_net, rq->allow_net };
	_cleanup_(bk_command_fini) bk_command cmd = { 0 };
	size_t ring = rq->ring_size ? rq->ring_size : cfg->process_ring;
	uint32_t rows = rq->size && rq->size->rows ? rq->size->rows : 24;
	uint32_t cols = rq->size && rq->size->cols ? rq->size->cols : 80;
	int64_t runtime = rq->max_runtime_ms ? rq->max_runtime_ms : cfg->process_runtime_max_ms;
	struct proc *p;

	if (!srv->executor || !ps) {
		bk_call_failf(call, BK_UNAVAILABLE, 0, "no executor: this server does not run commands");
		return;
	}
	/* A process that exposes a port runs in the sandbox's network namespace, which every such
	 * process shares: a grant's listener there would serve them all. */
	if (rq->expose_port && rq->n_allow_net) {
		bk_call_failf(call, BK_INVALID_ARGUMENT, 0,
			      "allow_net and expose_port: a process exposing a port shares the sandbox's network namespace");
		return;
	}
	if (rq->expose_port > 65535) {
		bk_call_failf(call, BK_INVALID_ARGUMENT, 0, "expose_port %u: a port is 1-65535", rq->expose_port);
		return;
	}
	if (rq->ring_size > cfg->process_ring_max) {
		bk_call_failf(call, BK_INVALID_ARGUMENT, 0,
			      "ring_size %" PRIu64 " is above the server's maximum of %zu bytes (boxkited --process-ring-max)",
			      rq->ring_size, cfg->process_ring_max);
		return;
	}
	if (cfg->process_runtime_max_ms && rq->max_runtime_ms > cfg->process_runtime_max_ms) {
		bk_call_failf(call, BK_INVALID_ARGUMENT, 0,
			      "max_runtime %g s is above the server's maximum of %g s (boxkited --process-runtime-max)",
			      rq->max_runtime_ms / 1000.0, (double)cfg->process_runtime_max_ms / 1000);
		return;
	}
	if (!rq->tty && rq->size && (rq->size->rows || rq->size->cols)) {
		bk_call_failf(call, BK_INVALID_ARGUMENT, 0, "a terminal size without a terminal (tty)");
		return;
	}
	if (rows > 65535 || cols > 65535) {
		bk_call_failf(call, BK_INVALID_ARGUMENT, 0, "a terminal is 1-65535 rows and columns");
		return;
	}
	if (strlen(rq->tag) > TAG_MAX) {
		bk_call_failf(call, BK_INVALID_ARGUMENT, 0, "the tag is %zu bytes; at most %d", strlen(rq->tag), TAG_MAX);
		return;
	}
	if (bk_command_prepare(call, &crq, &cmd) < 0)
		return;
	p = calloc(1, sizeof(*p));
	if (p) {
		p->argc = cmd.spawn.n_argv;
		p->argv = argv_copy(cmd.spawn.n_argv, cmd.spawn.argv);
		p->tag = strdup(rq->tag);
		p->cwd_asked = strdup(cmd.cwd_asked);
		p->start = calloc(1, sizeof(*p->start));
	}
	if (!p || !p->argv || !p->tag || !p->cwd_asked || !p->start) {
		if (p)
			proc_free(p);
		bk_call_failf(call, BK_RESOURCE_EXHAUSTED, 0, "out of memory");
		return;
	}
	p->start->ps = ps;
	p->start->call = call;
	p->start->kind = CALL_START;
	p->start->item.send = waiter_send;
	p->start->start = (Boxkite__V1__ProcessStartResponse)BOXKITE__V1__PROCESS_START_RESPONSE__INIT;
	p->run.ops = &proc_ops;
	p->run.tty = rq->tty;
	p->run.lossless = rq->lossless;
	p->run.keep_stdin = rq->stdin_open;
	p->reserved = 2 * ring;
	p->expose_port = rq->expose_port;
	p->lease_ms = rq->lease_ms;
	clock_gettime(CLOCK_MONOTONIC, &p->started);
	p->started_wall_ms = bk_clock_realtime_ms();
	if (runtime)
		p->runtime_at = bk_clock_monotonic_ms() + runtime;

	bk_runs_lock(ps->rs);
	const char *refused = NULL;
	int status = BK_RESOURCE_EXHAUSTED;
	char why[256];
	if (ps->stopping) {
		refused = "boxkited is shutting down";
		status = BK_UNAVAILABLE;
	} else if (ps->count >= cfg->processes_max) {
		snprintf(why, sizeof(why),
			 "%u processes are kept already (boxkited --processes-max): remove ended ones (ProcessRemove)",
			 ps->count);
		refused = why;
	} else if (ps->ring_reserved + p->reserved > cfg->process_ring_budget) {
		snprintf(why, sizeof(why),
			 "the rings of the processes kept take %zu of the %zu bytes boxkited gives them "
			 "(--process-ring-budget), and this one's %zu do not fit: remove ended ones, or ask a smaller ring_size",
			 ps->ring_reserved, cfg->process_ring_budget, p->reserved);
		refused = why;
	} else if (p->expose_port) {
		for (struct proc *q = ps->procs; q; q = q->next) {
			if (q->expose_port == p->expose_port && !q->run.exited) {
				snprintf(why, sizeof(why), "process %s exposes port %u already", q->name, q->expose_port);
				refused = why;
				status = BK_ALREADY_EXISTS;
				break;
			}
		}
	}
	if (!refused && bk_run_init(&p->run, ps->rs, BK_RING_KEEP_TAIL, ring, ring, true) < 0) {
		/* What was made of its rings goes with the record, the engine's way. */
		bk_run_free(&p->run);
		p = NULL;
		refused = "out of memory";
		status = BK_RESOURCE_EXHAUSTED;
	}
	if (!refused) {
		snprintf(p->name, sizeof(p->name), "p%" PRIu64, ++ps->names);
		*ps->tail = p;
		ps->tail = &p->next;
		ps->count++;
		ps->ring_reserved += p->reserved;
	}
	bk_runs_unlock(ps->rs);
	if (refused) {
		bk_call_failf(call, status, 0, "%s", refused);
		if (p)
			proc_free(p);
		return;
	}
	cmd.spawn.rows = p->run.tty ? rows : 0;
	cmd.spawn.cols = p->run.tty ? cols : 0;
	cmd.spawn.sandbox_net = p->expose_port != 0;
	bk_run_spawn(&p->run, &cmd.spawn);
}

/* --- the other rpcs -------------------------------------------------------------------------- */

/* Look the process up (the lock taken), and count the call as its client's presence. NULL: the
 * call has been failed (the lock is let go first). epoch: the one it was named in, or 0 (any). */
static struct proc *lookup(bk_processes *ps, bk_call *call, const char *name, uint64_t epoch)
{
	struct proc *p;

	if (!ps) {
		bk_call_failf(call, BK_UNAVAILABLE, 0, "no executor: this server does not run commands");
		return NULL;
	}
	bk_runs_lock(ps->rs);
	if (epoch && epoch != ps->epoch) {
		/* The name is another epoch's: the p1 of now is not the p1 the caller knew. */
		bk_runs_unlock(ps->rs);
		bk_call_failf(call, BK_NOT_FOUND, 0,
			      "no process '%.64s' of the epoch given: boxkited restarted, or the sandbox was reset, since "
			      "it was started",
			      name);
		return NULL;
	}
	p = proc_find(ps, name);
	if (!p || !p->run.started) {
		bk_runs_unlock(ps->rs);
		bk_call_failf(call, BK_NOT_FOUND, 0, "no process '%.64s'", name);
		return NULL;
	}
	p->seen_ms = bk_clock_monotonic_ms();
	return p;
}

static uint32_t wait_ms(uint32_t asked)
{
	return asked > BK_PROCESS_WAIT_MAX_MS ? BK_PROCESS_WAIT_MAX_MS : asked;
}

/* Answer now if w has its answer (a read: and room for it) or does not want to wait; else keep it
 * waiting, parked. One that wants to wait and cannot (every place for a waiting call is taken:
 * BK_PARKED_MAX) is answered now with when to ask again, so that a follower does not spin. */
static void wait_or_answer(bk_processes *ps, struct proc *p, struct waiter *w, uint32_t ms, bool ready)
{
	bool room = w->kind != CALL_READ || read_has_room(ps, p, w);
	uint32_t retry_after_ms = 0;

	if ((!ready || !room) && ms && p->run.live) {
		if (bk_call_park(w->call)) {
			if (ready)
				ps->starved = true;
			bk_run_wait(&p->run, &w->wait, bk_clock_monotonic_ms() + ms);
			return;
		}
		retry_after_ms = BK_PROCESS_RETRY_AFTER_MS;
	}
	if (w->kind == CALL_READ)
		post_read(ps, p, w, retry_after_ms);
	else
		post_wait(ps, p, w, retry_after_ms);
}

/* OUT_OF_RANGE, naming the stream (or both) whose offset is past what it produced. */
static void read_past_end(bk_processes *ps, struct proc *p, struct waiter *w)
{
	static const char *const names[2] = { "stdout", "stderr" };
	char what[2][96] = { "", "" };
	int n = 0;

	for (int i = 0; i < 2; i++) {
		uint64_t end = bk_ring_end(p->run.out[i].ring);
		if (w->off[i] > end)
			snprintf(what[n++], sizeof(what[0]), "%s offset %" PRIu64 " is past its end, %" PRIu64, names[i],
				 w->off[i], end);
	}
	post_fail(ps, w, BK_OUT_OF_RANGE, "%s%s%s", what[0], n == 2 ? "; " : "", what[1]);
}

void bk_handle_process_read(bk_call *call, const ProtobufCMessage *request)
{
	const Boxkite__V1__ProcessReadRequest *rq = (const Boxkite__V1__ProcessReadRequest *)request;
	bk_processes *ps = call->srv->processes;
	struct waiter *w;
	struct proc *p;

	if (rq->max_bytes > BK_PROCESS_READ_MAX) {
		bk_call_failf(call, BK_INVALID_ARGUMENT, 0, "max_bytes %u: at most %u per stream", rq->max_bytes, BK_PROCESS_READ_MAX);
		return;
	}
	w = waiter_new(call, CALL_READ);
	if (!w)
		return;
	w->off[0] = rq->stdout_offset;
	w->off[1] = rq->stderr_offset;
	w->max_bytes = rq->max_bytes ? rq->max_bytes : BK_PROCESS_READ_DEFAULT;
	w->marks = rq->marks;
	p = lookup(ps, call, rq->process_id, rq->epoch);
	if (!p) {
		free(w);
		return;
	}
	/* Lossless: what lies before the offsets asked has been read; a paused stream goes on. */
	for (int i = 0; p->run.lossless && p->run.live && i < 2; i++)
		bk_run_asked(&p->run, i, w->off[i]);
	if (w->off[0] > bk_ring_end(p->run.out[0].ring) || w->off[1] > bk_ring_end(p->run.out[1].ring))
		read_past_end(ps, p, w);
	else
		wait_or_answer(ps, p, w, wait_ms(rq->wait_ms), read_ready(p, w));
	bk_runs_unlock(ps->rs);
}

void bk_handle_process_wait(bk_call *call, const ProtobufCMessage *request)
{
	const Boxkite__V1__ProcessWaitRequest *rq = (const Boxkite__V1__ProcessWaitRequest *)request;
	bk_processes *ps = call->srv->processes;
	struct waiter *w = waiter_new(call, CALL_WAIT);
	struct proc *p;

	if (!w)
		return;
	p = lookup(ps, call, rq->process_id, rq->epoch);
	if (!p) {
		free(w);
		return;
	}
	wait_or_answer(ps, p, w, wait_ms(rq->wait_ms), p->run.exited);
	bk_runs_unlock(ps->rs);
}

void bk_handle_process_write(bk_call *call, const ProtobufCMessage *request)
{
	const Boxkite__V1__ProcessWriteRequest *rq = (const Boxkite__V1__ProcessWriteRequest *)request;
	bk_processes *ps = call->srv->processes;
	struct waiter *w;
	struct proc *p;

	if (rq->data.len > BK_PROCESS_WRITE_MAX) {
		bk_call_failf(call, BK_INVALID_ARGUMENT, 0, "%zu bytes: a write is at most %u", rq->data.len, BK_PROCESS_WRITE_MAX);
		return;
	}
	w = waiter_new(call, CALL_WRITE);
	if (!w)
		return;
	p = lookup(ps, call, rq->process_id, rq->epoch);
	if (!p) {
		free(w);
		return;
	}
	if (p->run.in.busy) {
		post_fail(ps, w, BK_FAILED_PRECONDITION, "a write to %s is in flight: send the next once it is answered",
			  p->name);
	} else if (!p->run.in.open) {
		post_fail(ps, w, BK_FAILED_PRECONDITION, "%s", p->run.exited ? "the process has ended"
						   : "its stdin is closed (or was not kept open: stdin_open)");
	} else {
		/* The request's bytes live as long as its call: the rest goes as the process reads. */
		bk_run_stdin_write(&p->run, rq->data.data, rq->data.len, rq->close);
		if (p->run.in.busy && bk_call_park(call)) {
			bk_run_wait(&p->run, &w->wait, bk_clock_monotonic_ms() + BK_PROCESS_WAIT_MAX_MS);
		} else if (p->run.in.busy) {
			/* It cannot wait without holding one of the contexts every other call needs: what
			 * went in is answered, and when to send the rest. */
			post_written(ps, w, bk_run_stdin_cancel(&p->run), BK_PROCESS_RETRY_AFTER_MS);
		} else {
			post_write_over(ps, p, w);
		}
	}
	bk_runs_unlock(ps->rs);
}

void bk_handle_process_close_stdin(bk_call *call, const ProtobufCMessage *request)
{
	const Boxkite__V1__ProcessCloseStdinRequest *rq = (const Boxkite__V1__ProcessCloseStdinRequest *)request;
	Boxkite__V1__ProcessCloseStdinResponse resp = BOXKITE__V1__PROCESS_CLOSE_STDIN_RESPONSE__INIT;
	bk_processes *ps = call->srv->processes;
	struct proc *p = lookup(ps, call, rq->process_id, rq->epoch);

	if (!p)
		return;
	bk_run_stdin_close(&p->run);
	bk_runs_unlock(ps->rs);
	bk_call_reply(call, &resp.base);
}

struct signal_ctx {
	bk_call *call;
	bk_link *link;
};

static void signal_replied(void *arg, int err, bk_reply *reply, int *fds, size_t nfds)
{
	struct signal_ctx *sc = arg;
	Boxkite__V1__ProcessSignalResponse resp = BOXKITE__V1__PROCESS_SIGNAL_RESPONSE__INIT;

	(void)fds;
	(void)nfds;
	if (err == ESRCH)
		bk_call_failf(sc->call, BK_FAILED_PRECONDITION, 0, "the process has ended");
	else if (err)
		bk_call_failf(sc->call, err == EAGAIN || err == EPIPE || err == ENOBUFS ? BK_UNAVAILABLE : BK_INTERNAL,
			      0, "signal: %s", bk_link_why(sc->link, err, reply));
	else
		bk_call_reply(sc->call, &resp.base);
	bk_reply_free(reply);
	free(sc);
}

void bk_handle_process_signal(bk_call *call, const ProtobufCMessage *request)
{
	const Boxkite__V1__ProcessSignalRequest *rq = (const Boxkite__V1__ProcessSignalRequest *)request;
	bk_processes *ps = call->srv->processes;
	struct signal_ctx *sc;
	struct proc *p;

	if (rq->signal < 1 || rq->signal > 64) {
		bk_call_failf(call, BK_INVALID_ARGUMENT, 0, "signal %d: a signal is 1-64", rq->signal);
		return;
	}
	if (rq->signal == SIGSTOP) {
		/* The tree's init forwards what it can catch, and SIGSTOP cannot be caught. */
		bk_call_failf(call, BK_INVALID_ARGUMENT, 0,
			      "SIGSTOP cannot be forwarded to the tree; SIGTSTP stops what does not handle it");
		return;
	}
	sc = malloc(sizeof(*sc));
	if (!sc) {
		bk_call_failf(call, BK_RESOURCE_EXHAUSTED, 0, "out of memory");
		return;
	}
	p = lookup(ps, call, rq->process_id, rq->epoch);
	if (!p) {
		free(sc);
		return;
	}
	if (p->run.exited) {
		bk_runs_unlock(ps->rs);
		free(sc);
		bk_call_failf(call, BK_FAILED_PRECONDITION, 0, "the process has ended");
		return;
	}
	if (rq->kill_after_ms) {
		p->kill_at = bk_clock_monotonic_ms() + rq->kill_after_ms;
		bk_run_due(&p->run, p->kill_at);
	}
	/* Its answer takes no lock of the engine's: sent with it held. */
	sc->call = call;
	sc->link = call->srv->executor;
	bk_run_signal(&p->run, rq->signal, signal_replied, sc);
	bk_runs_unlock(ps->rs);
}

void bk_handle_process_resize(bk_call *call, const ProtobufCMessage *request)
{
	const Boxkite__V1__ProcessResizeRequest *rq = (const Boxkite__V1__ProcessResizeRequest *)request;
	Boxkite__V1__ProcessResizeResponse resp = BOXKITE__V1__PROCESS_RESIZE_RESPONSE__INIT;
	bk_processes *ps = call->srv->processes;
	struct winsize ws = { 0 };
	struct proc *p;
	int err = 0;

	if (!rq->size || rq->size->rows < 1 || rq->size->rows > 65535 || rq->size->cols < 1 || rq->size->cols > 65535) {
		bk_call_failf(call, BK_INVALID_ARGUMENT, 0, "a terminal is 1-65535 rows and columns");
		return;
	}
	p = lookup(ps, call, rq->process_id, rq->epoch);
	if (!p)
		return;
	ws.ws_row = (unsigned short)rq->size->rows;
	ws.ws_col = (unsigned short)rq->size->cols;
	if (!p->run.tty)
		err = ENOTTY;
	else if (p->run.in.fd < 0 || p->run.exited)
		err = ESRCH;
	else if (ioctl(p->run.in.fd, TIOCSWINSZ, &ws) < 0)
		err = errno;
	bk_runs_unlock(ps->rs);
	if (err == ENOTTY)
		bk_call_failf(call, BK_FAILED_PRECONDITION, 0, "the process has no terminal (start it with tty)");
	else if (err == ESRCH)
		bk_call_failf(call, BK_FAILED_PRECONDITION, 0, "the process has ended");
	else if (err)
		bk_call_failf(call, BK_INTERNAL, 0, "resize: %s", strerror(err));
	else
		bk_call_reply(call, &resp.base);
}

void bk_handle_process_remove(bk_call *call, const ProtobufCMessage *request)
{
	const Boxkite__V1__ProcessRemoveRequest *rq = (const Boxkite__V1__ProcessRemoveRequest *)request;
	Boxkite__V1__ProcessRemoveResponse resp = BOXKITE__V1__PROCESS_REMOVE_RESPONSE__INIT;
	bk_processes *ps = call->srv->processes;
	struct proc *p = lookup(ps, call, rq->process_id, rq->epoch);

	if (!p)
		return;
	if (!p->run.exited) {
		bk_runs_unlock(ps->rs);
		bk_call_failf(call, BK_FAILED_PRECONDITION, 0, "%s is running: signal it first", rq->process_id);
		return;
	}
	/* Whoever still waits on it is answered what there is: the end. */
	bk_run_notify(&p->run, bk_clock_monotonic_ms(), true);
	proc_remove(ps, p);
	bk_runs_unlock(ps->rs);
	bk_call_reply(call, &resp.base);
}

void bk_handle_process_list(bk_call *call, const ProtobufCMessage *request)
{
	Boxkite__V1__ProcessListResponse resp = BOXKITE__V1__PROCESS_LIST_RESPONSE__INIT;
	bk_processes *ps = call->srv->processes;
	Boxkite__V1__ProcessInfo *infos = NULL, **ptrs = NULL;
	Boxkite__V1__ProcessStatus *sts = NULL;
	size_t n = 0;

	(void)request;
	if (!ps) {
		bk_call_failf(call, BK_UNAVAILABLE, 0, "no executor: this server does not run commands");
		return;
	}
	/* Built under the lock, pointing into the records: they stay while it is held, and the
	 * answer is packed before it is let go (a list is small: --processes-max records). */
	bk_runs_lock(ps->rs);
	infos = calloc(ps->count + 1, sizeof(*infos));
	ptrs = calloc(ps->count + 1, sizeof(*ptrs));
	sts = calloc(ps->count + 1, sizeof(*sts));
	if (!infos || !ptrs || !sts) {
		bk_runs_unlock(ps->rs);
		bk_call_failf(call, BK_RESOURCE_EXHAUSTED, 0, "out of memory");
		goto out;
	}
	for (struct proc *p = ps->procs; p; p = p->next) {
		Boxkite__V1__ProcessInfo *in = &infos[n];
		if (!p->run.started)
			continue;
		*in = (Boxkite__V1__ProcessInfo)BOXKITE__V1__PROCESS_INFO__INIT;
		in->process_id = p->name;
		in->n_argv = p->argc;
		in->argv = p->argv;
		in->tag = p->tag;
		fill_status(p, &sts[n]);
		in->status = &sts[n];
		in->expose_port = p->expose_port;
		in->started_ms = p->started_wall_ms;
		in->tty = p->run.tty;
		in->stdout_end = bk_ring_end(p->run.out[0].ring);
		in->stderr_end = bk_ring_end(p->run.out[1].ring);
		ptrs[n++] = in;
	}
	resp.n_processes = n;
	resp.processes = ptrs;
	resp.epoch = ps->epoch;
	bk_call_reply(call, &resp.base);
	bk_runs_unlock(ps->rs);
out:
	free(infos);
	free(ptrs);
	free(sts);
}

/* --- lifecycle ------------------------------------------------------------------------------- */

/* Every record gone, the running ones killed; waiting calls answered (status, message). */
static unsigned drop_all(bk_processes *ps, int status, const char *why)
{
	unsigned killed = 0;
	int64_t now = bk_clock_monotonic_ms();

	while (ps->procs) {
		struct proc *p = ps->procs;
		/* One that exited (a reset's KillAll has ended them all) ends with what it wrote: whoever
		 * follows it is answered its end, not the drop. */
		bk_run_finish(&p->run, now);
		for (bk_run_waiter *bw = bk_run_unwait_all(&p->run), *next; bw; bw = next) {
			next = bw->next;
			post_fail(ps, (struct waiter *)((char *)bw - offsetof(struct waiter, wait)), status, "%s", why);
		}
		if (proc_running(p))
			killed++;
		if (p->start) {
			/* Its Spawn is still out: its answer ends it (proc_spawned, ECANCELED). */
			ps->procs = p->next;
			p->next = NULL;
			ps->count--;
			ps->ring_reserved -= p->reserved;
			bk_run_drop(&p->run);
			continue;
		}
		proc_remove(ps, p);
	}
	ps->tail = &ps->procs;
	return killed;
}

bool bk_processes_exposing(bk_server *srv, unsigned port)
{
	bk_processes *ps = srv->processes;
	bool found = false;

	if (!ps || !port)
		return false;
	bk_runs_lock(ps->rs);
	for (struct proc *p = ps->procs; p && !found; p = p->next)
		found = p->expose_port == port && proc_running(p);
	bk_runs_unlock(ps->rs);
	return found;
}

void bk_processes_reset_begin(bk_server *srv)
{
	bk_processes *ps = srv->processes;
	int64_t now = bk_clock_monotonic_ms();

	if (!ps)
		return;
	bk_runs_lock(ps->rs);
	for (struct proc *p = ps->procs; p; p = p->next) {
		if (p->run.exited)
			continue;
		p->reset_kills = true;
		bk_run_notify(&p->run, now, true);
	}
	bk_runs_unlock(ps->rs);
}

unsigned bk_processes_reset(bk_server *srv)
{
	bk_processes *ps = srv->processes;
	unsigned killed;

	if (!ps)
		return 0;
	bk_runs_lock(ps->rs);
	killed = drop_all(ps, BK_ABORTED, "the sandbox was reset");
	/* The next tenant's first process is p1: how many ran before it is not its to know. Its p1 is
	 * of a new epoch: no call meant for the last tenant's p1 reaches it. */
	ps->names = 0;
	epoch_renew(ps);
	bk_runs_unlock(ps->rs);
	return killed;
}

int bk_processes_start(bk_server *srv, bk_error **err)
{
	bk_processes *ps = calloc(1, sizeof(*ps));

	if (!ps)
		return bk_error_errno(err, ENOMEM, "processes");
	ps->srv = srv;
	ps->rs = srv->runs;
	ps->tail = &ps->procs;
	epoch_renew(ps);
	srv->processes = ps;
	return 0;
}

void bk_processes_stop(bk_server *srv)
{
	bk_processes *ps = srv->processes;

	if (!ps)
		return;
	bk_runs_lock(ps->rs);
	ps->stopping = true;
	drop_all(ps, BK_UNAVAILABLE, "boxkited is shutting down");
	bk_runs_unlock(ps->rs);
}

void bk_processes_free(bk_server *srv)
{
	free(srv->processes);
	srv->processes = NULL;
}
