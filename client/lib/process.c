/* The process rpcs (start, read, write, close stdin, signal, wait, resize, list, remove), following
 * a process's output to its end on top of them, the streaming exec that runs a command that way,
 * and Reset. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "request.h"
#include "cleanup.h"
#include "clock.h"

/* The most one ProcessWrite carries (the server's limit). */
#define WRITE_MAX (1u << 20)
/* How long the server may hold a ProcessWrite whose process does not read before it answers
 * with what went in. */
#define WRITE_WAIT_MS 60000
/* Each read of bk_process_follow() long-polls this long (BK_FOLLOW_POLL_MS). A call that waits
 * keeps the process's lease for its whole wait, also when its client died meanwhile (the server
 * learns of that only when it answers): short, so that a dead follower's lease runs out soon
 * after. */
#define FOLLOW_WAIT_MS BK_FOLLOW_POLL_MS
/* A process that ended while a stream is still open (a descendant held it, and the server has
 * not seen it close yet) answers reads at once: between two such reads, this pause. */
#define FOLLOW_DRAIN_PAUSE_NS (50 * 1000 * 1000)
/* What bk_exec_stream() waits, after a SIGKILL, for the tree to be gone before removing it. */
#define KILL_WAIT_MS 10000
/* Reset empties two volumes and checks them: it may take minutes on a large workspace. */
#define RESET_WAIT_MS (10 * 60 * 1000)

/* Every process rpc but read, wait and write: the client's default timeout. */
static int process_call(bk_client *c, const char *method, const ProtobufCMessage *req,
			const ProtobufCMessageDescriptor *desc, void *resp, int timeout_ms, bk_status *st)
{
	bool verified;

	return bk_client_call(c, method, req, desc, (ProtobufCMessage **)resp, timeout_ms, &verified, st);
}

/* A wait asked for, as the server grants it. */
static uint32_t long_poll_ms(uint32_t wait_ms)
{
	return wait_ms < BK_PROCESS_LONG_POLL_MAX_MS ? wait_ms : BK_PROCESS_LONG_POLL_MAX_MS;
}

/* What is left of a wait of wait_ms begun at `since` (CLOCK_MONOTONIC ms). */
static uint32_t wait_left(uint32_t wait_ms, int64_t since)
{
	int64_t waited = bk_clock_monotonic_ms() - since;

	return waited >= (int64_t)wait_ms ? 0 : wait_ms - (uint32_t)waited;
}

/* The server could not keep a call waiting and said when to ask again: wait that long (at most
 * `left`, the caller's own wait, when it has one). */
static void retry_pause(uint32_t retry_after_ms, uint32_t left)
{
	uint32_t ms = left && left < retry_after_ms ? left : retry_after_ms;
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* An answer's epoch, as the caller asked it: an epoch given must be the answer's (the server
 * refuses another), and 0 learns it. */
static int epoch_check(uint64_t *epoch, uint64_t answered, const char *method, bk_status *st)
{
	if (*epoch && answered != *epoch)
		return bk_status_set(st, BK_DATA_LOSS, 0, true, "%s: the answer is about another epoch's process", method);
	*epoch = answered;
	return BK_OK;
}

/* The status an answer carries. An answer without one is a broken answer, not "exit 0". */
static int status_from_pb(const Boxkite__V1__ProcessStatus *pb, const char *method, bk_process_status *out,
			  bk_status *st)
{
	memset(out, 0, sizeof(*out));
	if (!pb)
		return bk_status_set(st, BK_DATA_LOSS, 0, true, "%s: the answer carries no process status", method);
	out->running = pb->running;
	out->exit_code = pb->exit_code;
	out->signal = pb->signal;
	out->runtime_exceeded = pb->runtime_exceeded;
	out->lease_expired = pb->lease_expired;
	out->oom_killed = pb->oom_killed;
	out->duration_us = pb->duration_us;
	return BK_OK;
}

int bk_process_start(bk_client *c, const bk_process_request *rq, bk_process_started *out, bk_status *st)
{
	Boxkite__V1__ProcessStartRequest req = BOXKITE__V1__PROCESS_START_REQUEST__INIT;
	Boxkite__V1__TerminalSize size = BOXKITE__V1__TERMINAL_SIZE__INIT;
	_cleanup_response_ Boxkite__V1__ProcessStartResponse *resp = NULL;
	_cleanup_free_ Boxkite__V1__EnvVar *vars = NULL;
	_cleanup_free_ Boxkite__V1__EnvVar **varp = NULL;
	size_t argc;
	int code;

	memset(out, 0, sizeof(*out));
	code = bk_command_pb(rq->argv, rq->shell, rq->env, rq->n_env, &argc, &vars, &varp, st);
	if (code != BK_OK)
		return code;
	req.n_argv = argc;
	req.argv = (char **)rq->argv;
	req.shell = (char *)(rq->shell ? rq->shell : "");
	req.cwd = (char *)(rq->cwd ? rq->cwd : "");
	req.n_env = rq->n_env;
	req.env = varp;
	req.expose_port = rq->expose_port;
	req.max_runtime_ms = rq->max_runtime_ms;
	req.ring_size = rq->ring_size;
	req.stdin_open = rq->stdin_open;
	req.tty = rq->tty;
	if (rq->tty && (rq->rows || rq->cols)) {
		size.rows = rq->rows;
		size.cols = rq->cols;
		req.size = &size;
	}
	req.tag = (char *)(rq->tag ? rq->tag : "");
	req.lease_ms = rq->lease_ms;
	req.lossless = rq->lossless;
	req.n_allow_net = rq->n_allow_net;
	req.allow_net = (char **)rq->allow_net;
	code = process_call(c, "ProcessStart", &req.base, &boxkite__v1__process_start_response__descriptor, &resp, 0,
			    st);
	if (code != BK_OK)
		return code;
	if (!resp->process_id[0] || strlen(resp->process_id) >= sizeof(out->id))
		return bk_status_set(st, BK_DATA_LOSS, 0, true, "ProcessStart: the answer's process id is empty or too long");
	if (!resp->epoch)
		return bk_status_set(st, BK_DATA_LOSS, 0, true, "ProcessStart: the answer names no epoch");
	snprintf(out->id, sizeof(out->id), "%s", resp->process_id);
	out->epoch = resp->epoch;
	snprintf(out->isolation_profile, sizeof(out->isolation_profile), "%s", resp->isolation_profile);
	return BK_OK;
}

/* One stream of a read's answer into *out, its bytes the next `length` of the answer's data (at
 * *at, moved on past them). The answer must be about the offset asked: bytes from it, or from
 * later with what was lost between. */
static int chunk_from(const Boxkite__V1__StreamChunk *pb, const char *name, uint64_t asked, const bk_answer_data *a,
		      size_t *at, bk_stream_chunk *out, bk_status *st)
{
	if (!pb)
		return bk_status_set(st, BK_DATA_LOSS, 0, true, "ProcessRead: the answer has no %s", name);
	if (pb->length > a->len - *at)
		return bk_status_set(st, BK_DATA_LOSS, 0, true, "ProcessRead: %s says %u bytes, the answer carries %zu",
				     name, pb->length, a->len - *at);
	if (pb->offset < asked || pb->offset - asked != pb->lost || pb->offset + pb->length > pb->end)
		return bk_status_set(st, BK_DATA_LOSS, 0, true,
				     "ProcessRead: %s from offset %llu (lost %llu, end %llu) does not answer offset %llu",
				     name, (unsigned long long)pb->offset, (unsigned long long)pb->lost,
				     (unsigned long long)pb->end, (unsigned long long)asked);
	out->data = pb->length ? (uint8_t *)a->data + *at : NULL;
	out->len = pb->length;
	out->offset = pb->offset;
	out->lost = pb->lost;
	out->end = pb->end;
	out->eof = pb->eof;
	*at += pb->length;
	return BK_OK;
}

/* A chunk's marks (ProcessRead's marks), copied out of the answer. */
typedef struct out_mark {
	uint64_t offset, seq;
	int64_t time_ms;
} out_mark;

typedef struct chunk_marks {
	out_mark *v;
	size_t n;
} chunk_marks;

/* The marks of one chunk, checked: present when it has bytes, in offset order, the first at or
 * before its offset and the others within it, their seq never going back. */
static int marks_from(const Boxkite__V1__StreamChunk *pb, const char *name, const bk_stream_chunk *ch,
		      chunk_marks *out, bk_status *st)
{
	if (!ch->len) {
		if (pb->n_marks)
			return bk_status_set(st, BK_DATA_LOSS, 0, true, "ProcessRead: %s has marks and no bytes", name);
		return BK_OK;
	}
	if (!pb->n_marks || pb->marks[0]->offset > ch->offset)
		return bk_status_set(st, BK_DATA_LOSS, 0, true, "ProcessRead: no mark for %s's offset %llu", name,
				     (unsigned long long)ch->offset);
	out->v = calloc(pb->n_marks, sizeof(*out->v));
	if (!out->v)
		return bk_status_set(st, BK_RESOURCE_EXHAUSTED, 0, false, "out of memory");
	for (size_t k = 0; k < pb->n_marks; k++) {
		const Boxkite__V1__OutputMark *m = pb->marks[k];
		if (k && (m->offset <= pb->marks[k - 1]->offset || m->offset >= ch->offset + ch->len ||
			  m->seq < pb->marks[k - 1]->seq))
			return bk_status_set(st, BK_DATA_LOSS, 0, true, "ProcessRead: %s's marks are out of order", name);
		out->v[k] = (out_mark){ .offset = m->offset, .seq = m->seq, .time_ms = m->time_ms };
	}
	out->n = pb->n_marks;
	return BK_OK;
}

static void marks_free(chunk_marks *marks)
{
	for (int i = 0; marks && i < 2; i++) {
		free(marks[i].v);
		marks[i] = (chunk_marks){ 0 };
	}
}

/* One ProcessRead of req: its answer in *out (the chunks' marks asked for and copied into
 * marks[2] when marks is not NULL: free them with marks_free), the server's retry-after in
 * *retry_after_ms. */
static int read_once(bk_client *c, Boxkite__V1__ProcessReadRequest *req, uint64_t *epoch, bk_process_output *out,
		     chunk_marks *marks, uint32_t *retry_after_ms, bk_status *st)
{
	_cleanup_response_ Boxkite__V1__ProcessReadResponse *resp = NULL;
	bk_answer_data *a;
	bk_request call;
	size_t at = 0;
	bool verified;
	int code;

	memset(out, 0, sizeof(*out));
	req->marks = marks != NULL;
	/* The output stays in the answer it arrived in, and the chunks point into it. */
	a = calloc(1, sizeof(*a));
	if (!a)
		return bk_status_set(st, BK_RESOURCE_EXHAUSTED, 0, false, "out of memory");
	out->answer = a;
	code = bk_request_init(c, &call, "ProcessRead", &req->base, 0, NULL, st);
	/* A long-poll has its wait on top of the client's timeout: the timeout is for the answer
	 * to come once the server gives it. */
	if (code == BK_OK)
		code = bk_request_call(c, &call, NULL, &boxkite__v1__process_read_response__descriptor,
				       (ProtobufCMessage **)&resp, (int)req->wait_ms + bk_client_timeout(c), &verified, a,
				       st);
	if (code == BK_OK &&
	    (code = chunk_from(resp->stdout, "stdout", req->stdout_offset, a, &at, &out->out, st)) == BK_OK &&
	    (code = chunk_from(resp->stderr, "stderr", req->stderr_offset, a, &at, &out->err, st)) == BK_OK &&
	    (code = status_from_pb(resp->status, "ProcessRead", &out->status, st)) == BK_OK && at != a->len)
		code = bk_status_set(st, BK_DATA_LOSS, 0, true, "ProcessRead: %zu bytes of the answer's data belong to no stream",
				     a->len - at);
	if (code == BK_OK && marks &&
	    (code = marks_from(resp->stdout, "stdout", &out->out, &marks[0], st)) == BK_OK)
		code = marks_from(resp->stderr, "stderr", &out->err, &marks[1], st);
	if (code == BK_OK)
		code = epoch_check(epoch, resp->epoch, "ProcessRead", st);
	if (code == BK_OK) {
		*retry_after_ms = resp->retry_after_ms;
		return BK_OK;
	}
	bk_process_output_free(out);
	marks_free(marks);
	return code;
}

/* bk_process_read, with marks as read_once's. An answer that came early, with when to ask again
 * (retry_after_ms), goes to the caller if it carries something; else it is asked again after the
 * pause, within the wait (a read that got no room for the bytes there are, until it gets them).
 * A read that got no answer in time is asked once more, at once: a read is only offsets, so asking
 * again is safe, and a caller that was stopped (^Z) past its timeout finds the timer of the read it
 * left waiting due at the moment the answer is there too — which of the two nng takes first is
 * chance; the second read says what became of the process (its lease ran out) or times out too. */
static int process_read(bk_client *c, const char *id, uint64_t *epoch, uint64_t stdout_offset, uint64_t stderr_offset,
			uint32_t max_bytes, uint32_t wait_ms, bk_process_output *out, chunk_marks *marks, bk_status *st)
{
	Boxkite__V1__ProcessReadRequest req = BOXKITE__V1__PROCESS_READ_REQUEST__INIT;
	int64_t since = bk_clock_monotonic_ms();
	uint32_t retry_after_ms = 0;
	bool timed_out = false;
	int code;

	req.process_id = (char *)id;
	req.stdout_offset = stdout_offset;
	req.stderr_offset = stderr_offset;
	req.max_bytes = max_bytes;
	wait_ms = long_poll_ms(wait_ms);
	for (;;) {
		bool nothing, more;

		req.epoch = *epoch;
		req.wait_ms = wait_left(wait_ms, since);
		code = read_once(c, &req, epoch, out, marks, &retry_after_ms, st);
		if (code == BK_DEADLINE_EXCEEDED && !timed_out) {
			timed_out = true;
			continue;
		}
		if (code != BK_OK || !retry_after_ms)
			return code;
		nothing = !out->out.len && !out->err.len && !out->out.lost && !out->err.lost;
		more = out->out.offset < out->out.end || out->err.offset < out->err.end;
		if (!nothing || (!out->status.running && !more) || (!more && !wait_left(wait_ms, since)))
			return code;
		bk_process_output_free(out);
		marks_free(marks);
		retry_pause(retry_after_ms, more ? 0 : wait_left(wait_ms, since));
	}
}

int bk_process_read(bk_client *c, const char *id, uint64_t *epoch, uint64_t stdout_offset, uint64_t stderr_offset,
		    uint32_t max_bytes, uint32_t wait_ms, bk_process_output *out, bk_status *st)
{
	return process_read(c, id, epoch, stdout_offset, stderr_offset, max_bytes, wait_ms, out, NULL, st);
}

void bk_process_output_free(bk_process_output *out)
{
	if (!out)
		return;
	bk_answer_data_free(out->answer);
	free(out->answer);
	out->answer = NULL;
	out->out.data = out->err.data = NULL;
	out->out.len = out->err.len = 0;
}

int bk_process_write(bk_client *c, const char *id, uint64_t epoch, const void *data, size_t len, bool close,
		     uint64_t *written, bk_status *st)
{
	const uint8_t *p = data;
	size_t done = 0;
	int code = BK_OK;

	if (written)
		*written = 0;
	/* At least one request: a write of nothing may still close stdin. */
	do {
		Boxkite__V1__ProcessWriteRequest req = BOXKITE__V1__PROCESS_WRITE_REQUEST__INIT;
		_cleanup_response_ Boxkite__V1__ProcessWriteResponse *resp = NULL;
		size_t n = len - done < WRITE_MAX ? len - done : WRITE_MAX;

		req.process_id = (char *)id;
		req.epoch = epoch;
		req.data = (ProtobufCBinaryData){ .len = n, .data = (uint8_t *)p + done };
		req.close = close && done + n == len;
		code = process_call(c, "ProcessWrite", &req.base, &boxkite__v1__process_write_response__descriptor, &resp,
				    WRITE_WAIT_MS + bk_client_timeout(c), st);
		if (code != BK_OK)
			break;
		if (resp->written > n) {
			code = bk_status_set(st, BK_DATA_LOSS, 0, true, "ProcessWrite: %llu bytes written of %zu sent",
					     (unsigned long long)resp->written, n);
			break;
		}
		/* What did not go in is sent again: the server waited for a reader that did not read.
		 * A close asked for with it is asked again with the rest. */
		done += resp->written;
		if (written)
			*written = done;
		if (resp->written == n && req.close)
			break;
		/* The server could not wait for the process to take the rest: not before it said. */
		if (resp->retry_after_ms && done < len)
			retry_pause(resp->retry_after_ms, 0);
	} while (done < len);
	return code;
}

int bk_process_close_stdin(bk_client *c, const char *id, uint64_t epoch, bk_status *st)
{
	Boxkite__V1__ProcessCloseStdinRequest req = BOXKITE__V1__PROCESS_CLOSE_STDIN_REQUEST__INIT;
	_cleanup_response_ Boxkite__V1__ProcessCloseStdinResponse *resp = NULL;

	req.process_id = (char *)id;
	req.epoch = epoch;
	return process_call(c, "ProcessCloseStdin", &req.base, &boxkite__v1__process_close_stdin_response__descriptor,
			    &resp, 0, st);
}

int bk_process_signal(bk_client *c, const char *id, uint64_t epoch, int signal, uint32_t kill_after_ms,
		      bk_status *st)
{
	Boxkite__V1__ProcessSignalRequest req = BOXKITE__V1__PROCESS_SIGNAL_REQUEST__INIT;
	_cleanup_response_ Boxkite__V1__ProcessSignalResponse *resp = NULL;

	req.process_id = (char *)id;
	req.epoch = epoch;
	req.signal = signal;
	req.kill_after_ms = kill_after_ms;
	return process_call(c, "ProcessSignal", &req.base, &boxkite__v1__process_signal_response__descriptor, &resp, 0,
			    st);
}

int bk_process_wait(bk_client *c, const char *id, uint64_t *epoch, uint32_t wait_ms, bk_process_status *out,
		    bk_status *st)
{
	Boxkite__V1__ProcessWaitRequest req = BOXKITE__V1__PROCESS_WAIT_REQUEST__INIT;
	int64_t since = bk_clock_monotonic_ms();
	int code;

	memset(out, 0, sizeof(*out));
	req.process_id = (char *)id;
	wait_ms = long_poll_ms(wait_ms);
	for (;;) {
		_cleanup_response_ Boxkite__V1__ProcessWaitResponse *resp = NULL;

		req.epoch = *epoch;
		req.wait_ms = wait_left(wait_ms, since);
		code = process_call(c, "ProcessWait", &req.base, &boxkite__v1__process_wait_response__descriptor, &resp,
				    (int)req.wait_ms + bk_client_timeout(c), st);
		if (code == BK_OK)
			code = status_from_pb(resp->status, "ProcessWait", out, st);
		if (code == BK_OK)
			code = epoch_check(epoch, resp->epoch, "ProcessWait", st);
		if (code != BK_OK || !resp->retry_after_ms || !out->running || !wait_left(wait_ms, since))
			return code;
		/* Answered before its wait: no place to wait at the server. Again after the pause. */
		retry_pause(resp->retry_after_ms, wait_left(wait_ms, since));
	}
}

int bk_process_resize(bk_client *c, const char *id, uint64_t epoch, uint32_t rows, uint32_t cols, bk_status *st)
{
	Boxkite__V1__ProcessResizeRequest req = BOXKITE__V1__PROCESS_RESIZE_REQUEST__INIT;
	Boxkite__V1__TerminalSize size = BOXKITE__V1__TERMINAL_SIZE__INIT;
	_cleanup_response_ Boxkite__V1__ProcessResizeResponse *resp = NULL;

	size.rows = rows;
	size.cols = cols;
	req.process_id = (char *)id;
	req.epoch = epoch;
	req.size = &size;
	return process_call(c, "ProcessResize", &req.base, &boxkite__v1__process_resize_response__descriptor, &resp, 0,
			    st);
}

void bk_process_list_free(bk_process_info *procs, size_t n)
{
	if (!procs)
		return;
	for (size_t i = 0; i < n; i++) {
		for (size_t j = 0; procs[i].argv && j < procs[i].argc; j++)
			free(procs[i].argv[j]);
		free(procs[i].argv);
		free(procs[i].tag);
	}
	free(procs);
}

/* One record, its strings copied out of the decoded answer. */
static int info_from_pb(const Boxkite__V1__ProcessInfo *pb, uint64_t epoch, bk_process_info *out, bk_status *st)
{
	int code;

	if (strlen(pb->process_id) >= sizeof(out->id))
		return bk_status_set(st, BK_DATA_LOSS, 0, true, "ProcessList: a process id is too long");
	snprintf(out->id, sizeof(out->id), "%s", pb->process_id);
	out->epoch = epoch;
	out->argv = calloc(pb->n_argv + 1, sizeof(*out->argv));
	out->tag = strdup(pb->tag);
	if (!out->argv || !out->tag)
		return bk_status_set(st, BK_RESOURCE_EXHAUSTED, 0, false, "out of memory");
	for (; out->argc < pb->n_argv; out->argc++)
		if (!(out->argv[out->argc] = strdup(pb->argv[out->argc])))
			return bk_status_set(st, BK_RESOURCE_EXHAUSTED, 0, false, "out of memory");
	code = status_from_pb(pb->status, "ProcessList", &out->status, st);
	if (code != BK_OK)
		return code;
	out->expose_port = pb->expose_port;
	out->started_ms = pb->started_ms;
	out->tty = pb->tty;
	out->stdout_end = pb->stdout_end;
	out->stderr_end = pb->stderr_end;
	return BK_OK;
}

int bk_process_list(bk_client *c, bk_process_info **procs, size_t *n, bk_status *st)
{
	Boxkite__V1__ProcessListRequest req = BOXKITE__V1__PROCESS_LIST_REQUEST__INIT;
	_cleanup_response_ Boxkite__V1__ProcessListResponse *resp = NULL;
	bk_process_info *v;
	int code;

	*procs = NULL;
	*n = 0;
	code = process_call(c, "ProcessList", &req.base, &boxkite__v1__process_list_response__descriptor, &resp, 0, st);
	if (code != BK_OK || !resp->n_processes)
		return code;
	v = calloc(resp->n_processes, sizeof(*v));
	if (!v)
		return bk_status_set(st, BK_RESOURCE_EXHAUSTED, 0, false, "out of memory");
	for (size_t i = 0; i < resp->n_processes; i++) {
		code = info_from_pb(resp->processes[i], resp->epoch, &v[i], st);
		if (code != BK_OK) {
			bk_process_list_free(v, i + 1);
			return code;
		}
	}
	*procs = v;
	*n = resp->n_processes;
	return BK_OK;
}

int bk_process_remove(bk_client *c, const char *id, uint64_t epoch, bk_status *st)
{
	Boxkite__V1__ProcessRemoveRequest req = BOXKITE__V1__PROCESS_REMOVE_REQUEST__INIT;
	_cleanup_response_ Boxkite__V1__ProcessRemoveResponse *resp = NULL;

	req.process_id = (char *)id;
	req.epoch = epoch;
	return process_call(c, "ProcessRemove", &req.base, &boxkite__v1__process_remove_response__descriptor, &resp, 0,
			    st);
}

/* One stream of one answer on its way to the handlers: its chunk, cut into pieces at its marks
 * (one piece, the whole chunk, without them), the next piece to hand over, and whether the
 * stream has more bytes than the answer carries. */
typedef struct follow_stream {
	int stream;              /* enum bk_stream */
	const bk_stream_chunk *ch;
	const chunk_marks *marks;
	size_t next;             /* the next piece */
	size_t pieces;
	bool cut;                /* the server holds more of it than this answer brought */
} follow_stream;

/* A run of one stream's bytes read together: where it starts, how long it is, its read number
 * and the time it was read. */
typedef struct follow_piece {
	uint64_t offset;
	size_t len;
	uint64_t seq;
	int64_t time_ms;
} follow_piece;

/* Piece k of f. */
static follow_piece piece(const follow_stream *f, size_t k)
{
	uint64_t end = f->ch->offset + f->ch->len;
	follow_piece p = { .offset = f->ch->offset, .len = f->ch->len };

	if (f->marks && f->marks->n) {
		p.offset = k ? f->marks->v[k].offset : f->ch->offset;
		p.len = (size_t)((k + 1 < f->marks->n ? f->marks->v[k + 1].offset : end) - p.offset);
		p.seq = f->marks->v[k].seq;
		p.time_ms = f->marks->v[k].time_ms;
	}
	return p;
}

/* Hand the pieces of one answer's two streams to the handlers and move the offsets on. With
 * output_at, in the order they were read (by read number): a stream the answer cut short (the
 * server had more) may still have bytes read before the other stream's later pieces, so those
 * wait for the next answer, which asks for them again. false: a callback said stop. */
static bool deliver(const bk_process_handlers *h, follow_stream f[2], uint64_t *offsets[2])
{
	uint64_t limit = UINT64_MAX;

	for (int i = 0; i < 2; i++) {
		if (f[i].ch->lost && h->lost)
			h->lost(h->arg, f[i].stream, f[i].ch->offset, f[i].ch->lost);
		*offsets[i] = f[i].ch->offset;
		f[i].pieces = !f[i].ch->len ? 0 : f[i].marks && f[i].marks->n ? f[i].marks->n : 1;
		/* What the cut stream brought last is as late as this answer can order. */
		if (h->output_at && f[i].cut) {
			uint64_t last = f[i].pieces ? piece(&f[i], f[i].pieces - 1).seq : 0;
			if (last < limit)
				limit = last;
		}
	}
	for (;;) {
		follow_piece next[2];
		const uint8_t *data;
		int pick = -1;
		bool go_on;

		for (int i = 0; i < 2; i++) {
			if (f[i].next == f[i].pieces)
				continue;
			next[i] = piece(&f[i], f[i].next);
			if (h->output_at && next[i].seq > limit)
				continue;
			/* Without output_at: stdout's, then stderr's. */
			if (pick < 0 || (h->output_at && next[i].seq < next[pick].seq))
				pick = i;
		}
		if (pick < 0)
			return true;
		data = f[pick].ch->data + (next[pick].offset - f[pick].ch->offset);
		go_on = h->output_at ? h->output_at(h->arg, f[pick].stream, next[pick].offset, next[pick].time_ms, data,
						    next[pick].len)
				     : h->output(h->arg, f[pick].stream, next[pick].offset, data, next[pick].len);
		f[pick].next++;
		*offsets[pick] = next[pick].offset + next[pick].len;
		if (!go_on)
			return false;
	}
}

int bk_process_follow(bk_client *c, const char *id, uint64_t *epoch, uint64_t *stdout_offset,
		      uint64_t *stderr_offset, const bk_process_handlers *h, bk_process_status *status, bk_status *st)
{
	uint64_t target[2] = { 0, 0 }, *offsets[2] = { stdout_offset, stderr_offset };
	bool first = true;

	for (;;) {
		chunk_marks marks[2] = { { 0 }, { 0 } };
		follow_stream f[2];
		bk_process_output o;
		bool go_on, ended, caught_up;
		int code = process_read(c, id, epoch, *stdout_offset, *stderr_offset, 0, h->until_now ? 0 : FOLLOW_WAIT_MS,
					&o, h->output_at ? marks : NULL, st);

		if (code != BK_OK)
			return code;
		if (first) {
			target[0] = o.out.end;
			target[1] = o.err.end;
			first = false;
		}
		f[0] = (follow_stream){ .stream = BK_STREAM_STDOUT, .ch = &o.out, .marks = &marks[0],
					.cut = o.out.offset + o.out.len < o.out.end };
		f[1] = (follow_stream){ .stream = BK_STREAM_STDERR, .ch = &o.err, .marks = &marks[1],
					.cut = o.err.offset + o.err.len < o.err.end };
		go_on = deliver(h, f, offsets);
		ended = !o.status.running && o.out.eof && o.err.eof && *stdout_offset == o.out.end &&
			*stderr_offset == o.err.end;
		caught_up = h->until_now && *stdout_offset >= target[0] && *stderr_offset >= target[1];
		if ((ended || caught_up) && status)
			*status = o.status;
		if (!o.status.running && !ended && !o.out.len && !o.err.len)
			nanosleep(&(struct timespec){ .tv_nsec = FOLLOW_DRAIN_PAUSE_NS }, NULL);
		bk_process_output_free(&o);
		marks_free(marks);
		if (!go_on)
			return bk_status_set(st, BK_CANCELLED, 0, true, "following %s: stopped by the caller", id);
		if (ended || caught_up)
			return bk_status_set(st, BK_OK, 0, true, "OK");
	}
}

int bk_exec_stream(bk_client *c, const bk_process_request *rq, const bk_process_handlers *h,
		   bk_process_started *started_out, bk_process_status *status, bk_status *st)
{
	bk_process_started started;
	bk_process_status end;
	uint64_t so = 0, se = 0;
	int code;

	if (status)
		memset(status, 0, sizeof(*status));
	code = bk_process_start(c, rq, &started, st);
	if (started_out)
		*started_out = started;
	if (code != BK_OK)
		return code;
	if (h->started && !h->started(h->arg, started.id, started.epoch))
		code = bk_status_set(st, BK_CANCELLED, 0, true, "%s: not followed, stopped by the caller", started.id);
	else
		code = bk_process_follow(c, started.id, &started.epoch, &so, &se, h, status, st);
	if (code != BK_OK) {
		/* Nothing left running that nobody follows: kill the tree, give it time to go, and
		 * drop the record — in its epoch, so that a boxkited restarted meanwhile at the same
		 * address, whose p1 is another command, is left alone (BK_NOT_FOUND). The first
		 * failure is the one reported. */
		if (bk_process_signal(c, started.id, started.epoch, SIGKILL, 0, NULL) == BK_OK)
			(void)bk_process_wait(c, started.id, &started.epoch, KILL_WAIT_MS, &end, NULL);
		(void)bk_process_remove(c, started.id, started.epoch, NULL);
		return code;
	}
	/* The command ran and its status is known: a record that could not be removed does not
	 * change that (it holds no process). */
	(void)bk_process_remove(c, started.id, started.epoch, NULL);
	return bk_status_set(st, BK_OK, 0, true, "OK");
}

int bk_reset(bk_client *c, const bk_reset_request *rq, bk_reset_result *out, bk_status *st)
{
	Boxkite__V1__ResetRequest req = BOXKITE__V1__RESET_REQUEST__INIT;
	_cleanup_response_ Boxkite__V1__ResetResponse *resp = NULL;
	bk_key next = { 0 };
	bk_request call;
	bool verified;
	int code;

	memset(out, 0, sizeof(*out));
	if (rq && (rq->new_key_id || rq->new_key)) {
		bk_error *err = NULL;
		if (!rq->new_key || rq->new_key_len != BK_RESET_KEY_LEN)
			return bk_status_set(st, BK_INVALID_ARGUMENT, 0, false,
					     "the new key is %zu bytes: a reset installs a key of %d bytes", rq->new_key_len,
					     BK_RESET_KEY_LEN);
		/* The next tenant's secret travels in the request's body, which the MAC authenticates
		 * but does not hide. */
		if (!bk_client_private(c))
			return bk_status_set(st, BK_FAILED_PRECONDITION, 0, false,
					     "a new key for reset would cross the network in clear on a tcp:// URL: "
					     "use tls+tcp:// or ipc://");
		if (bk_key_init(&next, rq->new_key_id ? rq->new_key_id : "", rq->new_key, rq->new_key_len, &err) < 0) {
			code = bk_status_set(st, BK_INVALID_ARGUMENT, 0, false, "the new key: %s", bk_error_msg(err));
			bk_error_free(err);
			return code;
		}
		req.new_key_id = next.id;
		req.new_key_secret = (ProtobufCBinaryData){ .len = next.len, .data = next.secret };
	}
	code = bk_request_init(c, &call, "Reset", &req.base, 0, NULL, st);
	if (code == BK_OK) {
		/* After the reset the server holds only the new key: its answer is MAC'd with it. */
		if (next.mac)
			call.answer_key = &next;
		code = bk_request_call(c, &call, NULL, &boxkite__v1__reset_response__descriptor,
				       (ProtobufCMessage **)&resp, RESET_WAIT_MS + bk_client_timeout(c), &verified, NULL, st);
	}
	if (code != BK_OK) {
		if (next.mac)
			bk_key_clear(&next);
		return code;
	}
	if (next.mac)
		bk_client_set_key(c, &next);
	out->processes_killed = resp->processes_killed;
	out->entries_removed = resp->entries_removed;
	return BK_OK;
}
