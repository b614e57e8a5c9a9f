#include "runs/process.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "boundary/command.h"
#include "clock.h"
#include "log.h"

#define TAG_MAX 256
#define EXIT_GRACE_MS 200        /* as Exec's: pipes held open past the exit by another tree */
#define READ_BATCH (4u << 20)    /* bytes read from one stream per wake-up, before the others' turn */
#define SCRATCH_SIZE (256 * 1024)
#define RING_INITIAL (64 * 1024)

/* One output stream: the bytes [start, end) of everything it produced, in a buffer that grows up
 * to cap and then wraps (offset o is at o % cap). */
struct ring {
	int fd;                  /* the pipe (or terminal) it is read from; -1 once at EOF */
	uint8_t *buf;
	size_t alloc, cap;
	uint64_t start, end;
	uint64_t asked;          /* lossless: the furthest offset a read asked from */
	bool paused;             /* lossless: not read until a read asks further */
	bool eof;
};

enum watch_kind { WATCH_STDIN, WATCH_STDOUT, WATCH_STDERR };

struct watch {
	struct proc *p;
	enum watch_kind kind;
};

enum call_kind { CALL_READ, CALL_WAIT, CALL_WRITE };

/* A call that waits (a long-poll, a write the process has not taken yet), and its answer, made
 * here in advance so that answering never needs memory it might not get. */
struct waiter {
	struct waiter *next;     /* in proc.waiters, or bk_processes.outbox once answered */
	bk_call *call;
	enum call_kind kind;
	uint64_t off[2];
	uint32_t max_bytes;
	int64_t deadline_ms;
	/* the answer: failed (fail_status), a read's (made with its data: answer), or the response
	 * below */
	bk_answer *answer;
	uint8_t *data;           /* in answer: stdout's chunk[0].length bytes, then stderr's */
	int fail_status;
	char fail_msg[192];
	Boxkite__V1__ProcessStatus status;
	Boxkite__V1__StreamChunk chunk[2];
	Boxkite__V1__ProcessReadResponse read;
	Boxkite__V1__ProcessWaitResponse wait;
	Boxkite__V1__ProcessWriteResponse write;
};

struct proc {
	struct proc *next;       /* in bk_processes.procs (oldest first), or .dead */
	uint64_t exec_id;        /* BK_PROCESS_ID_BIT | n */
	char name[24];           /* "p<n>": the process id clients use */
	char **argv;             /* as started, for the list; one allocation */
	size_t argc;
	char *tag;
	char *cwd_asked;         /* for the start's error */
	uint32_t expose_port;
	bool tty;
	bool lossless;           /* output waits for readers (ProcessStartRequest.lossless) */
	bk_call *start_call;     /* until the executor answered the Spawn */
	bool dropped;            /* by a reset or the stop while its Spawn was out: not on the list */
	bool spawned, exited;
	int exit_code, signal;
	bool oom_killed, runtime_exceeded, lease_expired;
	struct timespec started;
	int64_t started_wall_ms;
	uint64_t duration_us;    /* once exited */
	int64_t runtime_at, kill_at, grace_at; /* deadlines (monotonic ms), 0: none */
	int64_t lease_ms, seen_ms;
	size_t reserved;         /* of the ring budget */
	struct ring out[2];
	int stdin_fd;            /* pipe's write end or the terminal; -1 once closed */
	bool stdin_open;         /* writes are taken */
	bool close_after_write;
	struct waiter *writer;   /* the write in flight */
	const uint8_t *wdata;    /* in the writer's request, alive while its call is */
	size_t wlen, woff;
	struct waiter *waiters;  /* reads and waits */
	struct watch watches[3];
};

struct bk_processes {
	bk_server *srv;
	pthread_t thread;
	bool thread_started;
	int epfd, wake_fd;
	pthread_mutex_t lock;    /* everything below */
	bool stopping;
	struct proc *procs, **tail;
	struct proc *dead;       /* removed: freed by the I/O thread after its batch */
	struct waiter *outbox;   /* answered, to be sent once the lock is let go */
	unsigned count;
	size_t ring_reserved;
	uint64_t next_n;
	uint8_t scratch[SCRATCH_SIZE];
};

static struct watch wake_watch;

static void wake(bk_processes *ps)
{
	uint64_t one = 1;

	if (write(ps->wake_fd, &one, sizeof(one)) < 0)
		bk_log(BK_LOG_ERROR, "process: cannot wake the I/O thread: %s", strerror(errno));
}

/* --- rings ----------------------------------------------------------------------------------- */

/* Room for n more bytes: the buffer grows while nothing has been dropped; where it cannot, the
 * ring is as large as it got. */
static void ring_room(struct ring *r, size_t n)
{
	size_t want = r->alloc ? r->alloc : RING_INITIAL;
	uint8_t *buf;

	if (r->alloc == r->cap || r->end + n <= r->alloc)
		return;
	while (want < r->end + n && want < r->cap)
		want *= 2;
	if (want > r->cap)
		want = r->cap;
	buf = realloc(r->buf, want);
	if (!buf) {
		r->cap = r->alloc;
		return;
	}
	r->buf = buf;
	r->alloc = want;
}

/* Where up to `want` bytes read next can go, straight into the ring (*at), and how many fit
 * there in one piece; 0 when the ring has no buffer at all (the bytes are lost). */
static size_t ring_space(struct ring *r, size_t want, uint8_t **at)
{
	size_t pos;

	ring_room(r, want);
	if (r->cap == 0)
		return 0;
	pos = (size_t)(r->end % r->cap);
	*at = r->buf + pos;
	/* growing: up to what is allocated; wrapping: up to the buffer's end */
	return (r->alloc < r->cap ? r->alloc : r->cap) - pos;
}

/* n bytes were written where ring_space() said (or lost, without a buffer). */
static void ring_commit(struct ring *r, size_t n)
{
	r->end += n;
	if (r->end - r->start > r->cap)
		r->start = r->end - r->cap;
}

static void ring_get(const struct ring *r, uint64_t off, uint8_t *out, size_t n)
{
	size_t at = (size_t)(off % r->cap), first = n < r->cap - at ? n : r->cap - at;

	memcpy(out, r->buf + at, first);
	memcpy(out + first, r->buf, n - first);
}

/* --- records --------------------------------------------------------------------------------- */

static struct proc *proc_find(bk_processes *ps, const char *name)
{
	for (struct proc *p = ps->procs; p; p = p->next)
		if (strcmp(p->name, name) == 0)
			return p;
	return NULL;
}

static struct proc *proc_find_exec(bk_processes *ps, uint64_t exec_id)
{
	for (struct proc *p = ps->procs; p; p = p->next)
		if (p->exec_id == exec_id)
			return p;
	return NULL;
}

static bool proc_running(const struct proc *p)
{
	return p->spawned && !p->exited;
}

/* Its exit came and both streams are at their end: nothing about it changes any more. */
static bool proc_ended(const struct proc *p)
{
	return p->exited && p->out[0].eof && p->out[1].eof;
}

static void unwatch_close(bk_processes *ps, int *fd)
{
	if (*fd >= 0) {
		epoll_ctl(ps->epfd, EPOLL_CTL_DEL, *fd, NULL);
		close(*fd);
		*fd = -1;
	}
}

static void proc_free(struct proc *p)
{
	for (int i = 0; i < 2; i++) {
		if (p->out[i].fd >= 0)
			close(p->out[i].fd);
		free(p->out[i].buf);
	}
	if (p->stdin_fd >= 0)
		close(p->stdin_fd);
	free(p->argv);
	free(p->tag);
	free(p->cwd_asked);
	free(p);
}

static void fill_status(const struct proc *p, Boxkite__V1__ProcessStatus *st)
{
	*st = (Boxkite__V1__ProcessStatus)BOXKITE__V1__PROCESS_STATUS__INIT;
	st->running = !p->exited;
	st->exit_code = p->exit_code;
	st->signal = p->signal;
	st->runtime_exceeded = p->runtime_exceeded;
	st->lease_expired = p->lease_expired;
	st->oom_killed = p->oom_killed;
	st->duration_us = p->exited ? p->duration_us : bk_elapsed_us(&p->started);
}

/* --- answers: made under the lock, sent once it is let go ------------------------------------ */

static struct waiter *waiter_new(bk_call *call, enum call_kind kind)
{
	struct waiter *w = calloc(1, sizeof(*w));

	if (!w) {
		bk_call_failf(call, BK_RESOURCE_EXHAUSTED, 0, "out of memory");
		return NULL;
	}
	w->call = call;
	w->kind = kind;
	return w;
}

static void post(bk_processes *ps, struct waiter *w)
{
	w->next = ps->outbox;
	ps->outbox = w;
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

/* What the read asked for, from where each ring is now: its bytes copied from the rings straight
 * into the answer's data field (the rings move on once the lock is let go), hashed and signed
 * outside the lock (send_answers). */
static void post_read(bk_processes *ps, struct proc *p, struct waiter *w)
{
	size_t n[2];

	w->read = (Boxkite__V1__ProcessReadResponse)BOXKITE__V1__PROCESS_READ_RESPONSE__INIT;
	for (int i = 0; i < 2; i++) {
		const struct ring *r = &p->out[i];
		Boxkite__V1__StreamChunk *c = &w->chunk[i];
		uint64_t off = w->off[i];

		*c = (Boxkite__V1__StreamChunk)BOXKITE__V1__STREAM_CHUNK__INIT;
		if (off < r->start) {
			c->lost = r->start - off;
			off = r->start;
		}
		n[i] = r->end - off < w->max_bytes ? (size_t)(r->end - off) : w->max_bytes;
		c->offset = off;
		c->end = r->end;
	}
	fill_status(p, &w->status);
	w->read.stdout = &w->chunk[0];
	w->read.stderr = &w->chunk[1];
	w->read.status = &w->status;
	for (int attempt = 0; attempt < 2 && !w->answer; attempt++) {
		/* Without memory for the bytes: none this time, the caller asks again from the same
		 * offsets; without memory for an answer at all: the call fails. */
		if (attempt)
			n[0] = n[1] = 0;
		for (int i = 0; i < 2; i++) {
			w->chunk[i].length = (uint32_t)n[i];
			w->chunk[i].eof = p->out[i].eof && w->chunk[i].offset + n[i] == p->out[i].end;
		}
		w->answer = bk_call_answer(w->call, &w->read.base, n[0] + n[1], &w->data);
	}
	if (!w->answer) {
		post_fail(ps, w, BK_RESOURCE_EXHAUSTED, "out of memory for the answer");
		return;
	}
	if (n[0])
		ring_get(&p->out[0], w->chunk[0].offset, w->data, n[0]);
	if (n[1])
		ring_get(&p->out[1], w->chunk[1].offset, w->data + n[0], n[1]);
	post(ps, w);
}

static void post_wait(bk_processes *ps, struct proc *p, struct waiter *w)
{
	w->wait = (Boxkite__V1__ProcessWaitResponse)BOXKITE__V1__PROCESS_WAIT_RESPONSE__INIT;
	fill_status(p, &w->status);
	w->wait.status = &w->status;
	post(ps, w);
}

static void post_written(bk_processes *ps, struct waiter *w, size_t written)
{
	w->write = (Boxkite__V1__ProcessWriteResponse)BOXKITE__V1__PROCESS_WRITE_RESPONSE__INIT;
	w->write.written = written;
	post(ps, w);
}

static void send_answers(bk_processes *ps)
{
	struct waiter *todo;

	pthread_mutex_lock(&ps->lock);
	todo = ps->outbox;
	ps->outbox = NULL;
	pthread_mutex_unlock(&ps->lock);
	while (todo) {
		struct waiter *next = todo->next;
		bk_digest digest;
		if (todo->fail_status) {
			bk_call_failf(todo->call, todo->fail_status, 0, "%s", todo->fail_msg);
		} else if (todo->kind == CALL_READ) {
			/* The one hash of these bytes on this side: the answer's MAC covers it. */
			if (bk_digest_of(todo->data, (size_t)todo->chunk[0].length + todo->chunk[1].length, &digest) < 0) {
				bk_call_answer_drop(todo->answer);
				bk_call_failf(todo->call, BK_INTERNAL, 0, "SHA-256 failed in libcrypto");
			} else {
				bk_call_reply_data(todo->call, todo->answer, &digest);
			}
		} else if (todo->kind == CALL_WAIT) {
			bk_call_reply(todo->call, &todo->wait.base);
		} else {
			bk_call_reply(todo->call, &todo->write.base);
		}
		free(todo);
		todo = next;
	}
}

/* Whether a read has something to return: bytes past an offset (or lost before it), or the end
 * of everything. */
static bool read_ready(const struct proc *p, const struct waiter *w)
{
	return w->off[0] < p->out[0].end || w->off[1] < p->out[1].end || w->off[0] < p->out[0].start ||
	       w->off[1] < p->out[1].start || proc_ended(p);
}

/* Answer every waiting call of p that has its answer now (force: every one, e.g. at the
 * deadline). A process with a call present is seen now, for its lease. */
static void notify(bk_processes *ps, struct proc *p, int64_t now, bool force)
{
	for (struct waiter **pp = &p->waiters; *pp;) {
		struct waiter *w = *pp;
		bool ready = w->kind == CALL_READ ? read_ready(p, w) : p->exited;
		if (!ready && !force && now < w->deadline_ms) {
			pp = &w->next;
			continue;
		}
		*pp = w->next;
		p->seen_ms = now;
		if (w->kind == CALL_READ)
			post_read(ps, p, w);
		else
			post_wait(ps, p, w);
	}
}

/* --- signals --------------------------------------------------------------------------------- */

struct signal_ctx {
	bk_call *call; /* NULL: nobody is answered (a deadline's kill) */
	bk_link *link;
};

static void signal_replied(void *arg, int err, bk_reply *reply, int *fds, size_t nfds)
{
	struct signal_ctx *sc = arg;
	Boxkite__V1__ProcessSignalResponse resp = BOXKITE__V1__PROCESS_SIGNAL_RESPONSE__INIT;

	(void)fds;
	(void)nfds;
	if (!sc->call) {
		if (err && err != ESRCH && err != EPIPE)
			bk_log(BK_LOG_ERROR, "process: kill: %s", bk_link_why(sc->link, err, reply));
	} else if (err == ESRCH) {
		bk_call_failf(sc->call, BK_FAILED_PRECONDITION, 0, "the process has ended");
	} else if (err) {
		bk_call_failf(sc->call, err == EAGAIN || err == EPIPE || err == ENOBUFS ? BK_UNAVAILABLE : BK_INTERNAL,
			      0, "signal: %s", bk_link_why(sc->link, err, reply));
	} else {
		bk_call_reply(sc->call, &resp.base);
	}
	bk_reply_free(reply);
	free(sc);
}

/* Signal p's whole tree (SIGKILL: its init, and the namespace goes with it; any other signal the
 * init forwards to every process). call: answered with the outcome, or NULL. May run under the
 * lock: the link never waits, and its callback takes no lock of ours. */
static void proc_signal(bk_processes *ps, struct proc *p, int sig, bk_call *call)
{
	Boxkite__Executor__Kill kill = BOXKITE__EXECUTOR__KILL__INIT;
	bk_order order = BOXKITE__EXECUTOR__ORDER__INIT;
	struct signal_ctx *sc = malloc(sizeof(*sc));

	if (!sc) {
		if (call)
			bk_call_failf(call, BK_RESOURCE_EXHAUSTED, 0, "out of memory");
		return;
	}
	sc->call = call;
	sc->link = ps->srv->executor;
	kill.exec_id = p->exec_id;
	kill.signal = sig;
	order.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_KILL;
	order.kill = &kill;
	/* Urgent: a runtime or lease ends the tree whatever the load. */
	bk_link_send(ps->srv->executor, &order, NULL, 0, call ? 0 : BK_LINK_URGENT, signal_replied, sc);
}

/* --- the I/O thread -------------------------------------------------------------------------- */

static int watch(bk_processes *ps, struct proc *p, enum watch_kind kind, int fd, uint32_t events)
{
	p->watches[kind] = (struct watch){ .p = p, .kind = kind };
	return epoll_ctl(ps->epfd, EPOLL_CTL_ADD, fd, &(struct epoll_event){ .events = events, .data.ptr = &p->watches[kind] });
}

/* Whether the I/O thread waits for room in stdin's pipe: only while a write is in flight. */
static void stdin_want(bk_processes *ps, struct proc *p, bool room)
{
	epoll_ctl(ps->epfd, EPOLL_CTL_MOD, p->stdin_fd,
		  &(struct epoll_event){ .events = room ? EPOLLOUT : 0, .data.ptr = &p->watches[WATCH_STDIN] });
}

static void stdin_close(bk_processes *ps, struct proc *p)
{
	p->stdin_open = false;
	if (p->tty) {
		/* A terminal's input ends as typed: end of file is ^D (the terminal stays, it is
		 * stdout too). */
		if (p->stdin_fd >= 0 && write(p->stdin_fd, "\x04", 1) < 0 && errno != EAGAIN)
			bk_log(BK_LOG_WARN, "process %s: ^D: %s", p->name, strerror(errno));
		return;
	}
	unwatch_close(ps, &p->stdin_fd);
}

/* Write what the writer has left, as far as the pipe takes it. */
static void stdin_pump(bk_processes *ps, struct proc *p)
{
	struct waiter *w = p->writer;

	while (p->woff < p->wlen) {
		ssize_t n = write(p->stdin_fd, p->wdata + p->woff, p->wlen - p->woff);
		if (n > 0) {
			p->woff += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		/* EPIPE: nothing reads its stdin any more. */
		stdin_want(ps, p, false);
		p->writer = NULL;
		post_fail(ps, w, BK_FAILED_PRECONDITION, "the process closed its stdin (%zu of %zu bytes written)", p->woff,
			  p->wlen);
		stdin_close(ps, p);
		return;
	}
	stdin_want(ps, p, false);
	p->writer = NULL;
	post_written(ps, w, p->woff);
	if (p->close_after_write)
		stdin_close(ps, p);
}

/* Whether the I/O thread reads the stream: not while a lossless ring is full. */
static void output_want(bk_processes *ps, struct proc *p, struct ring *r, bool paused)
{
	enum watch_kind kind = r == &p->out[0] ? WATCH_STDOUT : WATCH_STDERR;

	if (r->paused == paused || r->fd < 0)
		return;
	r->paused = paused;
	epoll_ctl(ps->epfd, EPOLL_CTL_MOD, r->fd,
		  &(struct epoll_event){ .events = paused ? 0 : EPOLLIN, .data.ptr = &p->watches[kind] });
}

/* Read what is there (up to READ_BATCH; lossless: up to what the ring holds unread). last: the
 * grace after the exit is over, the stream ends with what is there now. */
static void output_read(bk_processes *ps, struct proc *p, struct ring *r, bool last)
{
	size_t total = 0;

	while (r->fd >= 0 && (last || total < READ_BATCH)) {
		size_t room = sizeof(ps->scratch);
		if (p->lossless) {
			size_t unread = (size_t)(r->end - r->asked);
			if (unread >= r->cap) {
				output_want(ps, p, r, true);
				return;
			}
			if (r->cap - unread < room)
				room = r->cap - unread;
		}
		uint8_t *at = ps->scratch;
		size_t fits = ring_space(r, room, &at);
		if (fits)
			room = fits < room ? fits : room;
		ssize_t n = read(r->fd, at, room);
		if (n > 0) {
			ring_commit(r, (size_t)n);
			total += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN && !last)
			return;
		/* EOF; a terminal's EIO once nothing holds its other side; or the grace's end */
		unwatch_close(ps, &r->fd);
		r->eof = true;
	}
}

static void on_event(bk_processes *ps, struct watch *w, int64_t now)
{
	struct proc *p = w->p;

	switch (w->kind) {
	case WATCH_STDIN:
		if (p->writer)
			stdin_pump(ps, p);
		break;
	case WATCH_STDOUT:
	case WATCH_STDERR:
		output_read(ps, p, &p->out[w->kind == WATCH_STDOUT ? 0 : 1], false);
		notify(ps, p, now, false);
		break;
	}
}

/* Every deadline that has come: waits, writes, runtime, leases, kills after a grace, the exit's
 * grace. Returns the time to the next one (ms), or -1. */
static int deadlines(bk_processes *ps, int64_t now)
{
	int64_t next = INT64_MAX;

#define NEXT(t) do { if ((t) && (t) < next) next = (t); } while (0)
	for (struct proc *p = ps->procs; p; p = p->next) {
		if (p->exited && p->grace_at && now >= p->grace_at) {
			/* Lossless: what the pipes still hold waits for its readers first. */
			if (p->out[0].paused || p->out[1].paused) {
				p->grace_at = now + EXIT_GRACE_MS;
			} else {
				p->grace_at = 0;
				for (int i = 0; i < 2; i++)
					output_read(ps, p, &p->out[i], true);
			}
		}
		if (p->writer && now >= p->writer->deadline_ms) {
			/* The process is not reading: what went in is answered, the rest is the caller's. */
			stdin_want(ps, p, false);
			post_written(ps, p->writer, p->woff);
			p->writer = NULL;
		}
		notify(ps, p, now, false);
		if (proc_running(p)) {
			if (p->runtime_at && now >= p->runtime_at) {
				p->runtime_at = 0;
				p->runtime_exceeded = true;
				proc_signal(ps, p, SIGKILL, NULL);
			}
			if (p->kill_at && now >= p->kill_at) {
				p->kill_at = 0;
				proc_signal(ps, p, SIGKILL, NULL);
			}
			if (p->lease_ms && !p->waiters && !p->writer) {
				if (now >= p->seen_ms + p->lease_ms) {
					p->lease_ms = 0;
					p->lease_expired = true;
					bk_log(BK_LOG_INFO, "process %s: its lease ran out: killed", p->name);
					proc_signal(ps, p, SIGKILL, NULL);
				} else {
					NEXT(p->seen_ms + p->lease_ms);
				}
			}
			NEXT(p->runtime_at);
			NEXT(p->kill_at);
		}
		NEXT(p->grace_at);
		if (p->writer)
			NEXT(p->writer->deadline_ms);
		for (struct waiter *w = p->waiters; w; w = w->next)
			NEXT(w->deadline_ms);
	}
#undef NEXT
	if (next == INT64_MAX)
		return -1;
	return next <= now ? 0 : (int)(next - now > INT32_MAX ? INT32_MAX : next - now);
}

static void *io_main(void *arg)
{
	bk_processes *ps = arg;
	int timeout = -1;

	for (;;) {
		struct epoll_event evs[64];
		int n = epoll_wait(ps->epfd, evs, 64, timeout);
		int64_t now = bk_clock_monotonic_ms();
		bool stop;

		pthread_mutex_lock(&ps->lock);
		for (int i = 0; i < n; i++) {
			if (evs[i].data.ptr == &wake_watch) {
				uint64_t count;
				if (read(ps->wake_fd, &count, sizeof(count)) < 0 && errno != EAGAIN)
					bk_log(BK_LOG_ERROR, "process: wake-up read: %s", strerror(errno));
			} else {
				on_event(ps, evs[i].data.ptr, now);
			}
		}
		timeout = deadlines(ps, now);
		while (ps->dead) {
			struct proc *next = ps->dead->next;
			proc_free(ps->dead);
			ps->dead = next;
		}
		stop = ps->stopping;
		pthread_mutex_unlock(&ps->lock);
		send_answers(ps);
		if (stop)
			return NULL;
	}
}

/* --- start ----------------------------------------------------------------------------------- */

/* Off the list, its budget given back, onto the list the I/O thread frees after its batch. */
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
	for (int i = 0; i < 2; i++)
		unwatch_close(ps, &p->out[i].fd);
	unwatch_close(ps, &p->stdin_fd);
	ps->count--;
	ps->ring_reserved -= p->reserved;
	p->next = ps->dead;
	ps->dead = p;
	wake(ps);
}

/* The executor's answer to the Spawn (link thread): the process's descriptors, or why not. */
static void spawn_replied(void *arg, int err, bk_reply *reply, int *fds, size_t nfds)
{
	struct proc *p = arg;
	bk_call *call = p->start_call;
	bk_processes *ps = call->srv->processes;
	Boxkite__V1__ProcessStartResponse resp = BOXKITE__V1__PROCESS_START_RESPONSE__INIT;
	char msg[512], id[sizeof(p->name)];
	int status = 0;

	(void)nfds;
	pthread_mutex_lock(&ps->lock);
	p->start_call = NULL;
	if (p->dropped) {
		/* A reset or the stop came first: it does not run. */
		status = ps->stopping ? BK_UNAVAILABLE : BK_ABORTED;
		snprintf(msg, sizeof(msg), "%s", ps->stopping ? "boxkited is shutting down" : "the sandbox was reset");
		if (!err) {
			proc_signal(ps, p, SIGKILL, NULL);
			for (int i = 0; i < 3; i++)
				close(fds[i]);
		}
		p->next = ps->dead;
		ps->dead = p;
	} else if (err) {
		status = bk_command_spawn_failed(ps->srv, p->cwd_asked, err, reply, msg, sizeof(msg));
		proc_remove(ps, p);
	} else {
		for (int i = 0; i < 3; i++)
			fcntl(fds[i], F_SETFL, fcntl(fds[i], F_GETFL) | O_NONBLOCK);
		p->spawned = true;
		p->seen_ms = bk_clock_monotonic_ms();
		p->stdin_fd = fds[0];
		p->out[0].fd = fds[1];
		p->out[1].fd = fds[2];
		if (!p->stdin_open && !p->tty)
			p->stdin_fd = bk_close(p->stdin_fd);
		if ((p->stdin_fd >= 0 && watch(ps, p, WATCH_STDIN, p->stdin_fd, 0) < 0) ||
		    watch(ps, p, WATCH_STDOUT, p->out[0].fd, EPOLLIN) < 0 ||
		    watch(ps, p, WATCH_STDERR, p->out[1].fd, EPOLLIN) < 0) {
			/* Unwatched, its output would never be read: it does not run at all. */
			bk_log(BK_LOG_ERROR, "process %s: epoll_ctl: %s: killing it", p->name, strerror(errno));
			snprintf(msg, sizeof(msg), "boxkited could not watch the process: %s", strerror(errno));
			status = BK_INTERNAL;
			proc_signal(ps, p, SIGKILL, NULL);
			proc_remove(ps, p);
		} else {
			snprintf(id, sizeof(id), "%s", p->name);
			bk_log(BK_LOG_INFO, "process %s started%s", p->name, p->expose_port ? " (exposing a port)" : "");
		}
	}
	wake(ps);
	pthread_mutex_unlock(&ps->lock);
	if (status) {
		bk_call_failf(call, status, 0, "%s", msg);
	} else {
		resp.process_id = id;
		resp.isolation_profile = ps->srv->profile;
		bk_call_reply(call, &resp.base);
	}
	bk_reply_free(reply);
}

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
	bk_order order = BOXKITE__EXECUTOR__ORDER__INIT;
	size_t ring = rq->ring_size ? rq->ring_size : cfg->process_ring;
	uint32_t rows = rq->size && rq->size->rows ? rq->size->rows : 24;
	uint32_t cols = rq->size && rq->size->cols ? rq->size->cols : 80;
	int64_t runtime = rq->max_runtime_ms ? rq->max_runtime_ms : cfg->process_runtime_max_ms;
	struct proc *p;

	if (!srv->executor || !ps) {
		bk_call_failf(call, BK_UNAVAILABLE, 0, "no executor: this server does not run commands");
		return;
	}
	/* A process that exposes a port stays in the pod's network namespace: it has the pod's
	 * network, and a grant would say otherwise. */
	if (rq->expose_port && rq->n_allow_net) {
		bk_call_failf(call, BK_INVALID_ARGUMENT, 0,
			      "allow_net and expose_port: a process exposing a port shares the pod's network namespace");
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
	}
	if (!p || !p->argv || !p->tag || !p->cwd_asked) {
		if (p)
			proc_free(p);
		bk_call_failf(call, BK_RESOURCE_EXHAUSTED, 0, "out of memory");
		return;
	}
	p->stdin_fd = p->out[0].fd = p->out[1].fd = -1;
	p->out[0].cap = p->out[1].cap = ring;
	p->reserved = 2 * ring;
	p->tty = rq->tty;
	p->lossless = rq->lossless;
	p->stdin_open = rq->stdin_open;
	p->expose_port = rq->expose_port;
	p->lease_ms = rq->lease_ms;
	p->start_call = call;
	clock_gettime(CLOCK_MONOTONIC, &p->started);
	p->started_wall_ms = bk_clock_realtime_ms();
	if (runtime)
		p->runtime_at = bk_clock_monotonic_ms() + runtime;

	pthread_mutex_lock(&ps->lock);
	const char *refused = NULL;
	int status = BK_RESOURCE_EXHAUSTED;
	char why[256];
	if (ps->count >= cfg->processes_max) {
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
			if (q->expose_port == p->expose_port && !q->exited) {
				snprintf(why, sizeof(why), "process %s exposes port %u already", q->name, q->expose_port);
				refused = why;
				status = BK_ALREADY_EXISTS;
				break;
			}
		}
	}
	if (!refused) {
		uint64_t n = ++ps->next_n;
		p->exec_id = BK_PROCESS_ID_BIT | n;
		snprintf(p->name, sizeof(p->name), "p%" PRIu64, n);
		*ps->tail = p;
		ps->tail = &p->next;
		ps->count++;
		ps->ring_reserved += p->reserved;
	}
	pthread_mutex_unlock(&ps->lock);
	if (refused) {
		bk_call_failf(call, status, 0, "%s", refused);
		proc_free(p);
		return;
	}
	cmd.spawn.exec_id = p->exec_id;
	cmd.spawn.tty = p->tty;
	cmd.spawn.rows = p->tty ? rows : 0;
	cmd.spawn.cols = p->tty ? cols : 0;
	cmd.spawn.sandbox_net = p->expose_port != 0;
	order.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_SPAWN;
	order.spawn = &cmd.spawn;
	bk_link_send(srv->executor, &order, NULL, 0, 0, spawn_replied, p);
}

void bk_processes_exited(bk_server *srv, const Boxkite__Executor__Exited *exited)
{
	bk_processes *ps = srv->processes;
	struct proc *p;

	if (!ps)
		return;
	pthread_mutex_lock(&ps->lock);
	p = proc_find_exec(ps, exited->exec_id);
	if (p && !p->exited) {
		int64_t now = bk_clock_monotonic_ms();
		p->exited = true;
		p->exit_code = exited->exit_code;
		p->signal = exited->signal;
		p->oom_killed = exited->oom_killed;
		p->duration_us = bk_elapsed_us(&p->started);
		if (p->writer) {
			stdin_want(ps, p, false);
			post_fail(ps, p->writer, BK_FAILED_PRECONDITION, "the process ended (%zu of %zu bytes written)",
				  p->woff, p->wlen);
			p->writer = NULL;
		}
		p->stdin_open = false;
		if (!p->tty)
			unwatch_close(ps, &p->stdin_fd);
		/* Usually its streams are at their end already; if something outside its tree holds
		 * them, what that writes is not this process's output: they end after the grace. */
		if (!p->out[0].eof || !p->out[1].eof)
			p->grace_at = now + EXIT_GRACE_MS;
		bk_log(BK_LOG_INFO, "process %s ended: exit %d, signal %d%s%s%s", p->name, p->exit_code, p->signal,
		       p->runtime_exceeded ? ", runtime exceeded" : "", p->lease_expired ? ", lease expired" : "",
		       p->oom_killed ? ", OOM" : "");
		notify(ps, p, now, false);
		wake(ps);
	}
	pthread_mutex_unlock(&ps->lock);
	send_answers(ps);
}

/* --- the other rpcs -------------------------------------------------------------------------- */

/* Look the process up (the lock held), and count the call as its client's presence. NULL: the
 * call has been failed (the lock is let go first). */
static struct proc *lookup(bk_processes *ps, bk_call *call, const char *name)
{
	struct proc *p;

	if (!ps) {
		bk_call_failf(call, BK_UNAVAILABLE, 0, "no executor: this server does not run commands");
		return NULL;
	}
	pthread_mutex_lock(&ps->lock);
	p = proc_find(ps, name);
	if (!p || !p->spawned) {
		pthread_mutex_unlock(&ps->lock);
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

/* Answer now if w has its answer or does not want to wait; else keep it waiting (parked). */
static void wait_or_answer(bk_processes *ps, struct proc *p, struct waiter *w, uint32_t ms, bool ready)
{
	int64_t now = bk_clock_monotonic_ms();

	if (!ready && ms && bk_call_park(w->call)) {
		w->deadline_ms = now + ms;
		w->next = p->waiters;
		p->waiters = w;
		wake(ps);
	} else if (w->kind == CALL_READ) {
		post_read(ps, p, w);
	} else {
		post_wait(ps, p, w);
	}
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
	p = lookup(ps, call, rq->process_id);
	if (!p) {
		free(w);
		return;
	}
	/* Lossless: what lies before the offsets asked has been read; a paused stream goes on. */
	for (int i = 0; p->lossless && i < 2; i++) {
		struct ring *r = &p->out[i];
		if (w->off[i] > r->asked && w->off[i] <= r->end)
			r->asked = w->off[i];
		if (r->paused && r->end - r->asked < r->cap) {
			output_want(ps, p, r, false);
			output_read(ps, p, r, false);
		}
	}
	if (w->off[0] > p->out[0].end || w->off[1] > p->out[1].end)
		post_fail(ps, w, BK_OUT_OF_RANGE,
			  "offsets %" PRIu64 "/%" PRIu64 " are past the ends of stdout/stderr (%" PRIu64 "/%" PRIu64 ")",
			  w->off[0], w->off[1], p->out[0].end, p->out[1].end);
	else
		wait_or_answer(ps, p, w, wait_ms(rq->wait_ms), read_ready(p, w));
	pthread_mutex_unlock(&ps->lock);
	send_answers(ps);
}

void bk_handle_process_wait(bk_call *call, const ProtobufCMessage *request)
{
	const Boxkite__V1__ProcessWaitRequest *rq = (const Boxkite__V1__ProcessWaitRequest *)request;
	bk_processes *ps = call->srv->processes;
	struct waiter *w = waiter_new(call, CALL_WAIT);
	struct proc *p;

	if (!w)
		return;
	p = lookup(ps, call, rq->process_id);
	if (!p) {
		free(w);
		return;
	}
	wait_or_answer(ps, p, w, wait_ms(rq->wait_ms), p->exited);
	pthread_mutex_unlock(&ps->lock);
	send_answers(ps);
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
	p = lookup(ps, call, rq->process_id);
	if (!p) {
		free(w);
		return;
	}
	if (p->writer) {
		post_fail(ps, w, BK_FAILED_PRECONDITION, "a write to %s is in flight: send the next once it is answered",
			  p->name);
	} else if (!p->stdin_open) {
		post_fail(ps, w, BK_FAILED_PRECONDITION, "%s", p->exited ? "the process has ended"
						   : "its stdin is closed (or was not kept open: stdin_open)");
	} else {
		p->writer = w;
		p->wdata = rq->data.data;
		p->wlen = rq->data.len;
		p->woff = 0;
		p->close_after_write = rq->close;
		w->deadline_ms = bk_clock_monotonic_ms() + BK_PROCESS_WAIT_MAX_MS;
		stdin_pump(ps, p);
		if (p->writer) {
			/* The pipe is full: the rest goes as the process reads. */
			stdin_want(ps, p, true);
			bk_call_park(call);
			wake(ps);
		}
	}
	pthread_mutex_unlock(&ps->lock);
	send_answers(ps);
}

void bk_handle_process_close_stdin(bk_call *call, const ProtobufCMessage *request)
{
	const Boxkite__V1__ProcessCloseStdinRequest *rq = (const Boxkite__V1__ProcessCloseStdinRequest *)request;
	Boxkite__V1__ProcessCloseStdinResponse resp = BOXKITE__V1__PROCESS_CLOSE_STDIN_RESPONSE__INIT;
	bk_processes *ps = call->srv->processes;
	struct proc *p = lookup(ps, call, rq->process_id);

	if (!p)
		return;
	if (p->writer)
		p->close_after_write = true;
	else if (p->stdin_open)
		stdin_close(ps, p);
	pthread_mutex_unlock(&ps->lock);
	bk_call_reply(call, &resp.base);
}

void bk_handle_process_signal(bk_call *call, const ProtobufCMessage *request)
{
	const Boxkite__V1__ProcessSignalRequest *rq = (const Boxkite__V1__ProcessSignalRequest *)request;
	bk_processes *ps = call->srv->processes;
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
	p = lookup(ps, call, rq->process_id);
	if (!p)
		return;
	if (p->exited) {
		pthread_mutex_unlock(&ps->lock);
		bk_call_failf(call, BK_FAILED_PRECONDITION, 0, "the process has ended");
		return;
	}
	if (rq->kill_after_ms) {
		p->kill_at = bk_clock_monotonic_ms() + rq->kill_after_ms;
		wake(ps);
	}
	proc_signal(ps, p, rq->signal, call);
	pthread_mutex_unlock(&ps->lock);
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
	p = lookup(ps, call, rq->process_id);
	if (!p)
		return;
	ws.ws_row = (unsigned short)rq->size->rows;
	ws.ws_col = (unsigned short)rq->size->cols;
	if (!p->tty)
		err = ENOTTY;
	else if (p->stdin_fd < 0 || p->exited)
		err = ESRCH;
	else if (ioctl(p->stdin_fd, TIOCSWINSZ, &ws) < 0)
		err = errno;
	pthread_mutex_unlock(&ps->lock);
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
	struct proc *p = lookup(ps, call, rq->process_id);

	if (!p)
		return;
	if (!p->exited) {
		pthread_mutex_unlock(&ps->lock);
		bk_call_failf(call, BK_FAILED_PRECONDITION, 0, "%s is running: signal it first", rq->process_id);
		return;
	}
	/* Whoever still waits on it is answered what there is: the end. */
	notify(ps, p, bk_clock_monotonic_ms(), true);
	proc_remove(ps, p);
	pthread_mutex_unlock(&ps->lock);
	send_answers(ps);
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
	pthread_mutex_lock(&ps->lock);
	infos = calloc(ps->count + 1, sizeof(*infos));
	ptrs = calloc(ps->count + 1, sizeof(*ptrs));
	sts = calloc(ps->count + 1, sizeof(*sts));
	if (!infos || !ptrs || !sts) {
		pthread_mutex_unlock(&ps->lock);
		bk_call_failf(call, BK_RESOURCE_EXHAUSTED, 0, "out of memory");
		goto out;
	}
	for (struct proc *p = ps->procs; p; p = p->next) {
		Boxkite__V1__ProcessInfo *in = &infos[n];
		if (!p->spawned)
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
		in->tty = p->tty;
		in->stdout_end = p->out[0].end;
		in->stderr_end = p->out[1].end;
		ptrs[n++] = in;
	}
	resp.n_processes = n;
	resp.processes = ptrs;
	bk_call_reply(call, &resp.base);
	pthread_mutex_unlock(&ps->lock);
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

	while (ps->procs) {
		struct proc *p = ps->procs;
		for (struct waiter *w = p->waiters, *next; w; w = next) {
			next = w->next;
			post_fail(ps, w, status, "%s", why);
		}
		p->waiters = NULL;
		if (p->writer) {
			post_fail(ps, p->writer, status, "%s", why);
			p->writer = NULL;
		}
		if (proc_running(p)) {
			proc_signal(ps, p, SIGKILL, NULL);
			killed++;
		}
		if (p->start_call) {
			/* Its Spawn is still out: its answer ends it (spawn_replied). */
			ps->procs = p->next;
			p->next = NULL;
			p->dropped = true;
			ps->count--;
			ps->ring_reserved -= p->reserved;
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
	pthread_mutex_lock(&ps->lock);
	for (struct proc *p = ps->procs; p && !found; p = p->next)
		found = p->expose_port == port && proc_running(p);
	pthread_mutex_unlock(&ps->lock);
	return found;
}

unsigned bk_processes_reset(bk_server *srv)
{
	bk_processes *ps = srv->processes;
	unsigned killed;

	if (!ps)
		return 0;
	pthread_mutex_lock(&ps->lock);
	killed = drop_all(ps, BK_ABORTED, "the sandbox was reset");
	pthread_mutex_unlock(&ps->lock);
	send_answers(ps);
	return killed;
}

int bk_processes_start(bk_server *srv, bk_error **err)
{
	bk_processes *ps = calloc(1, sizeof(*ps));
	int rv;

	if (!ps)
		return bk_error_errno(err, ENOMEM, "processes");
	srv->processes = ps;
	ps->srv = srv;
	ps->tail = &ps->procs;
	pthread_mutex_init(&ps->lock, NULL);
	ps->epfd = epoll_create1(EPOLL_CLOEXEC);
	ps->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (ps->epfd < 0 || ps->wake_fd < 0 ||
	    epoll_ctl(ps->epfd, EPOLL_CTL_ADD, ps->wake_fd, &(struct epoll_event){ .events = EPOLLIN, .data.ptr = &wake_watch }) < 0)
		return bk_error_errno(err, errno, "process I/O set-up");
	rv = pthread_create(&ps->thread, NULL, io_main, ps);
	if (rv)
		return bk_error_errno(err, rv, "process I/O thread");
	ps->thread_started = true;
	return 0;
}

void bk_processes_stop(bk_server *srv)
{
	bk_processes *ps = srv->processes;

	if (!ps)
		return;
	pthread_mutex_lock(&ps->lock);
	drop_all(ps, BK_UNAVAILABLE, "boxkited is shutting down");
	ps->stopping = true;
	wake(ps);
	pthread_mutex_unlock(&ps->lock);
	send_answers(ps);
	if (ps->thread_started)
		pthread_join(ps->thread, NULL);
	while (ps->dead) {
		struct proc *next = ps->dead->next;
		proc_free(ps->dead);
		ps->dead = next;
	}
	close(ps->epfd);
	close(ps->wake_fd);
	pthread_mutex_destroy(&ps->lock);
	free(ps);
	srv->processes = NULL;
}
