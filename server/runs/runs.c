#include "runs/runs.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"

/* Bytes read from one stream per wake-up, before the other streams' turn. */
#define RUNS_READ_BATCH (4u << 20)
/* How long a run's streams may stay open after its exit before they end with what they hold: a
 * process outside the run's tree that holds them (handed over a unix socket) writes what is not
 * the run's output. */
#define EXIT_GRACE_MS 200

enum watch_kind { WATCH_STDIN, WATCH_STDOUT, WATCH_STDERR };

struct bk_runs {
	bk_server *srv;
	pthread_t thread;
	bool thread_started;
	int epfd, wake_fd;
	pthread_mutex_t lock;      /* everything below, and every run */
	bool stopping;
	bk_run *runs;              /* spawning and live, newest first */
	bk_run *dead;              /* given back: freed after the I/O thread's batch */
	bk_outbox_item *outbox;    /* posted, to be sent once the lock is let go */
	uint64_t next_id;
	int64_t wakes_at;          /* when the I/O thread wakes next (0: only for an event) */
};

static struct bk_run_watch wake_watch; /* the eventfd's tag */

static void run_check(bk_run *run, int64_t now);

static void wake(bk_runs *rs)
{
	uint64_t one = 1;

	if (write(rs->wake_fd, &one, sizeof(one)) < 0)
		bk_log(BK_LOG_ERROR, "runs: cannot wake the I/O thread: %s", strerror(errno));
}

/* The I/O thread is to wake by `at` (the lock held). */
static void wake_by(bk_runs *rs, int64_t at)
{
	if (at && (!rs->wakes_at || at < rs->wakes_at)) {
		rs->wakes_at = at;
		wake(rs);
	}
}

void bk_runs_lock(bk_runs *rs)
{
	pthread_mutex_lock(&rs->lock);
}

void bk_runs_unlock(bk_runs *rs)
{
	bk_outbox_item *todo = rs->outbox;

	rs->outbox = NULL;
	pthread_mutex_unlock(&rs->lock);
	while (todo) {
		bk_outbox_item *next = todo->next;
		todo->send(todo);
		todo = next;
	}
}

void bk_runs_post(bk_runs *rs, bk_outbox_item *item)
{
	item->next = rs->outbox;
	rs->outbox = item;
}

/* --- the list of runs ------------------------------------------------------------------------ */

static void list_add(bk_runs *rs, bk_run *run)
{
	run->next = rs->runs;
	rs->runs = run;
}

static void list_remove(bk_runs *rs, bk_run *run)
{
	for (bk_run **pp = &rs->runs; *pp; pp = &(*pp)->next) {
		if (*pp == run) {
			*pp = run->next;
			break;
		}
	}
	run->next = NULL;
}

static bk_run *find_live(bk_runs *rs, uint64_t exec_id)
{
	for (bk_run *run = rs->runs; run; run = run->next)
		if (run->exec_id == exec_id && run->live)
			return run;
	return NULL;
}

/* --- descriptors ----------------------------------------------------------------------------- */

static int watch(bk_run *run, enum watch_kind kind, int fd, uint32_t events)
{
	run->watches[kind] = (struct bk_run_watch){ .run = run, .kind = kind };
	return epoll_ctl(run->rs->epfd, EPOLL_CTL_ADD, fd,
			 &(struct epoll_event){ .events = events, .data.ptr = &run->watches[kind] });
}

static void rewatch(bk_run *run, enum watch_kind kind, int fd, uint32_t events)
{
	epoll_ctl(run->rs->epfd, EPOLL_CTL_MOD, fd,
		  &(struct epoll_event){ .events = events, .data.ptr = &run->watches[kind] });
}

static void unwatch_close(bk_run *run, int *fd)
{
	if (*fd >= 0) {
		epoll_ctl(run->rs->epfd, EPOLL_CTL_DEL, *fd, NULL);
		*fd = bk_close(*fd);
	}
}

static void close_all(bk_run *run)
{
	unwatch_close(run, &run->in.fd);
	unwatch_close(run, &run->out[0].fd);
	unwatch_close(run, &run->out[1].fd);
	run->in.open = false;
}

/* --- output ---------------------------------------------------------------------------------- */

/* Whether the stream is read: not while a lossless ring holds as much unread as it can. */
static void stream_pause(bk_run *run, bk_run_stream *s, bool paused)
{
	if (s->paused == paused || s->fd < 0)
		return;
	s->paused = paused;
	rewatch(run, s == &run->out[0] ? WATCH_STDOUT : WATCH_STDERR, s->fd, paused ? 0 : EPOLLIN);
}

/* The bytes just read into s from at on: their read number (the next one when the other stream
 * was read last) and the time, beside the ring; marks of what the ring dropped go. */
static void stream_mark(bk_run *run, bk_run_stream *s, uint64_t at)
{
	int i = s == &run->out[0] ? BK_RUN_STDOUT : BK_RUN_STDERR;

	if (run->last_read != i) {
		run->read_seq++;
		run->last_read = i;
	}
	bk_marks_add(s->marks, at, run->read_seq, bk_clock_realtime_ms());
	bk_marks_trim(s->marks, bk_ring_first(s->ring));
}

/* Read what is there, up to RUNS_READ_BATCH (lossless: up to what the ring may hold unread).
 * last: the grace after the exit is over, the stream ends with what is there now. */
static void stream_read(bk_run *run, bk_run_stream *s, bool last)
{
	size_t total = 0;

	while (s->fd >= 0 && (last || total < RUNS_READ_BATCH)) {
		size_t max = RUNS_READ_BATCH - (last ? 0 : total);
		ssize_t n;

		if (run->lossless) {
			uint64_t unread = bk_ring_end(s->ring) - s->asked;
			size_t cap = bk_ring_cap(s->ring);
			if (unread >= cap) {
				stream_pause(run, s, true);
				return;
			}
			if (cap - unread < max)
				max = (size_t)(cap - unread);
		}
		uint64_t at = bk_ring_end(s->ring);
		n = bk_ring_read(s->ring, s->fd, max);
		if (n > 0) {
			total += (size_t)n;
			if (s->marks)
				stream_mark(run, s, at);
			continue;
		}
		if (n == -EINTR)
			continue;
		if (n == -EAGAIN && !last)
			return;
		/* EOF; a terminal's EIO once nothing holds its other side; or the grace's end */
		unwatch_close(run, &s->fd);
		s->eof = true;
	}
}

void bk_run_asked(bk_run *run, int i, uint64_t off)
{
	bk_run_stream *s = &run->out[i];

	if (off > s->asked && off <= bk_ring_end(s->ring))
		s->asked = off;
	if (s->paused && bk_ring_end(s->ring) - s->asked < bk_ring_cap(s->ring)) {
		stream_pause(run, s, false);
		stream_read(run, s, false);
		run_check(run, bk_clock_monotonic_ms());
	}
}

/* --- stdin ----------------------------------------------------------------------------------- */

/* Whether the I/O thread waits for room in stdin: only while a write is in flight. */
static void stdin_want(bk_run *run, bool room)
{
	if (run->in.fd >= 0)
		rewatch(run, WATCH_STDIN, run->in.fd, room ? EPOLLOUT : 0);
}

/* No more writes. A terminal's input ends as typed: ^D (the terminal stays: it is stdout too). */
static void stdin_shut(bk_run *run)
{
	run->in.open = false;
	if (run->tty) {
		if (run->in.fd >= 0 && write(run->in.fd, "\x04", 1) < 0 && errno != EAGAIN)
			bk_log(BK_LOG_WARN, "run %llu: ^D: %s", (unsigned long long)run->exec_id, strerror(errno));
		return;
	}
	unwatch_close(run, &run->in.fd);
}

static void stdin_over(bk_run *run, int err)
{
	stdin_want(run, false);
	run->in.busy = false;
	run->in.err = err;
}

/* Write what the write in flight has left, as far as stdin takes it. */
static void stdin_pump(bk_run *run)
{
	bk_run_stdin *in = &run->in;

	while (in->busy && in->off < in->len) {
		ssize_t n = write(in->fd, in->data + in->off, in->len - in->off);
		if (n > 0) {
			in->off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			stdin_want(run, true);
			return;
		}
		/* EPIPE: nothing reads its stdin any more; the rest is not for anyone. */
		stdin_over(run, EPIPE);
		stdin_shut(run);
		return;
	}
	if (in->busy) {
		stdin_over(run, 0);
		if (in->close_after)
			stdin_shut(run);
	}
}

void bk_run_stdin_write(bk_run *run, const uint8_t *data, size_t len, bool close_after)
{
	run->in.data = data;
	run->in.len = len;
	run->in.off = 0;
	run->in.err = 0;
	run->in.busy = true;
	run->in.close_after = close_after;
	stdin_pump(run);
}

void bk_run_stdin_close(bk_run *run)
{
	if (run->in.busy)
		run->in.close_after = true;
	else if (run->in.open)
		stdin_shut(run);
}

size_t bk_run_stdin_cancel(bk_run *run)
{
	if (run->in.busy)
		stdin_over(run, 0);
	return run->in.off;
}

/* --- waiting calls --------------------------------------------------------------------------- */

void bk_run_wait(bk_run *run, bk_run_waiter *w, int64_t deadline_ms)
{
	bk_runs *rs = run->rs;

	w->deadline_ms = deadline_ms;
	w->next = run->waiters;
	run->waiters = w;
	wake_by(rs, deadline_ms);
}

void bk_run_notify(bk_run *run, int64_t now, bool force)
{
	for (bk_run_waiter **pp = &run->waiters; *pp;) {
		bk_run_waiter *w = *pp;
		bk_run_waiter *next = w->next;

		if (run->ops->answer(run, w, now, force || now >= w->deadline_ms))
			*pp = next;
		else
			pp = &w->next;
	}
}

bk_run_waiter *bk_run_unwait_all(bk_run *run)
{
	return TAKE_PTR(run->waiters);
}

void bk_runs_recheck(bk_runs *rs)
{
	/* Each turn of the I/O thread asks every waiting call (deadlines()). */
	wake(rs);
}

/* --- the run's life -------------------------------------------------------------------------- */

/* Its exit came and both streams ended: the engine lets it go. */
static void run_check(bk_run *run, int64_t now)
{
	if (run->live && run->exited && run->out[0].eof && run->out[1].eof) {
		close_all(run);
		run->live = false;
		run->grace_at = 0;
		list_remove(run->rs, run);
		if (run->ops->ended)
			run->ops->ended(run);
	}
	/* A run that is no longer live is never looked at again by the I/O thread (neither for a
	 * deadline nor for a recheck): whoever still waits on it is answered now. */
	if (run->waiters)
		bk_run_notify(run, now, !run->live);
}

/* The grace after the exit is over: what the streams hold now, and their end. A lossless stream
 * whose ring is full waits for its readers first. */
static void grace_over(bk_run *run, int64_t now)
{
	run->grace_at = 0;
	for (int i = 0; i < 2; i++) {
		if (run->out[i].paused)
			continue;
		stream_read(run, &run->out[i], true);
	}
	if (!run->out[0].eof || !run->out[1].eof)
		run->grace_at = now + EXIT_GRACE_MS;
	run_check(run, now);
}

static void kill_replied(void *arg, int err, bk_reply *reply, int *fds, size_t nfds)
{
	bk_runs *rs = arg;

	(void)fds;
	(void)nfds;
	/* ESRCH: it exited meanwhile, its Exited event is on its way; EPIPE: the executor is gone,
	 * and every command with it. */
	if (err && err != ESRCH && err != EPIPE)
		bk_log(BK_LOG_ERROR, "runs: kill: %s", bk_link_why(rs->srv->executor, err, reply));
	bk_reply_free(reply);
}

void bk_run_signal(bk_run *run, int sig, bk_reply_fn done, void *arg)
{
	Boxkite__Executor__Kill kill = BOXKITE__EXECUTOR__KILL__INIT;
	bk_order order = BOXKITE__EXECUTOR__ORDER__INIT;
	bk_runs *rs = run->rs;

	kill.exec_id = run->exec_id;
	kill.signal = sig;
	order.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_KILL;
	order.kill = &kill;
	/* A deadline's kill is urgent: a timeout, a runtime or a lease ends the tree whatever the
	 * load. */
	if (done)
		bk_link_send(rs->srv->executor, &order, NULL, 0, 0, done, arg);
	else
		bk_link_send(rs->srv->executor, &order, NULL, 0, BK_LINK_URGENT, kill_replied, rs);
}

void bk_run_due(bk_run *run, int64_t at)
{
	if (at && (!run->due || at < run->due)) {
		run->due = at;
		wake_by(run->rs, at);
	}
}

int bk_run_init(bk_run *run, bk_runs *rs, enum bk_ring_policy policy, size_t stdout_cap, size_t stderr_cap,
		bool marked)
{
	run->rs = rs;
	run->in.fd = run->out[0].fd = run->out[1].fd = -1;
	run->last_read = -1;
	run->out[0].ring = bk_ring_new(policy, stdout_cap);
	run->out[1].ring = bk_ring_new(policy, stderr_cap);
	if (!run->out[0].ring || !run->out[1].ring)
		return -ENOMEM;
	for (int i = 0; marked && i < 2; i++) {
		run->out[i].marks = bk_marks_new(BK_MARKS_MAX);
		if (!run->out[i].marks)
			return -ENOMEM;
	}
	return 0;
}

/* The command's descriptors (stdin's write end, stdout's and stderr's read ends, now the run's)
 * watched: 0, or the errno of what failed, with every one closed. */
static int run_watch(bk_run *run, const int *fds)
{
	for (int i = 0; i < 3; i++)
		fcntl(fds[i], F_SETFL, fcntl(fds[i], F_GETFL) | O_NONBLOCK);
	run->in.fd = fds[0];
	run->out[0].fd = fds[1];
	run->out[1].fd = fds[2];
	if (!run->keep_stdin && !run->tty)
		run->in.fd = bk_close(run->in.fd);
	run->in.open = run->keep_stdin && run->in.fd >= 0;
	if ((run->in.fd >= 0 && watch(run, WATCH_STDIN, run->in.fd, 0) < 0) ||
	    watch(run, WATCH_STDOUT, run->out[0].fd, EPOLLIN) < 0 || watch(run, WATCH_STDERR, run->out[1].fd, EPOLLIN) < 0) {
		int err = errno;
		close_all(run);
		return err;
	}
	return 0;
}

/* The executor's answer to the Spawn (the link's thread): the run's descriptors, or why not. */
static void spawn_replied(void *arg, int err, bk_reply *reply, int *fds, size_t nfds)
{
	bk_run *run = arg;
	bk_runs *rs = run->rs;

	(void)nfds;
	bk_runs_lock(rs);
	run->spawning = false;
	run->started = !err;
	if (!err && run->dropped) {
		/* A reset or the stop came first: it does not run. */
		bk_run_signal(run, SIGKILL, NULL, NULL);
		for (int i = 0; i < 3; i++)
			close(fds[i]);
		err = ECANCELED;
	} else if (run->dropped) {
		err = ECANCELED;
	} else if (!err && (err = run_watch(run, fds)) != 0) {
		/* Unwatched, its output would never be read nor its end seen: it does not run at all. */
		bk_log(BK_LOG_ERROR, "run %llu: epoll_ctl: %s: killing it", (unsigned long long)run->exec_id,
		       strerror(err));
		bk_run_signal(run, SIGKILL, NULL, NULL);
	}
	if (err)
		list_remove(rs, run);
	else
		run->live = true;
	run->ops->spawned(run, err, reply);
	bk_runs_unlock(rs);
	bk_reply_free(reply);
}

void bk_run_spawn(bk_run *run, Boxkite__Executor__Spawn *spawn)
{
	bk_runs *rs = run->rs;
	bk_order order = BOXKITE__EXECUTOR__ORDER__INIT;

	pthread_mutex_lock(&rs->lock);
	run->exec_id = ++rs->next_id;
	run->spawning = true;
	list_add(rs, run);
	pthread_mutex_unlock(&rs->lock);
	spawn->exec_id = run->exec_id;
	spawn->tty = run->tty;
	order.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_SPAWN;
	order.spawn = spawn;
	bk_link_send(rs->srv->executor, &order, NULL, 0, 0, spawn_replied, run);
}

void bk_runs_exited(bk_server *srv, const Boxkite__Executor__Exited *exited)
{
	bk_runs *rs = srv->runs;
	bk_run *run;

	if (!rs)
		return;
	bk_runs_lock(rs);
	run = find_live(rs, exited->exec_id);
	if (run && !run->exited) {
		int64_t now = bk_clock_monotonic_ms();
		run->exited = true;
		run->exit_code = exited->exit_code;
		run->signal = exited->signal;
		run->oom_killed = exited->oom_killed;
		/* Its stdin has no reader left: a write in flight ends here. */
		if (run->in.busy)
			stdin_over(run, ESRCH);
		run->in.open = false;
		if (!run->tty)
			unwatch_close(run, &run->in.fd);
		if (run->ops->exited)
			run->ops->exited(run, now);
		/* Its init's exit means its whole PID namespace is gone: what its pipes hold is all there
		 * is, and their end is readable now — read here, so that the run ends with its exit and
		 * not whenever the I/O thread gets to it (a reset that follows a KillAll finds it ended).
		 * If something outside its tree holds them, what that writes is not this run's output:
		 * they end after the grace. */
		for (int i = 0; i < 2; i++)
			if (!run->out[i].paused)
				stream_read(run, &run->out[i], false);
		if (!run->out[0].eof || !run->out[1].eof) {
			run->grace_at = now + EXIT_GRACE_MS;
			wake_by(rs, run->grace_at);
		}
		run_check(run, now);
	}
	bk_runs_unlock(rs);
}

void bk_run_finish(bk_run *run, int64_t now)
{
	if (!run->live || !run->exited)
		return;
	for (int i = 0; i < 2; i++) {
		if (!run->out[i].paused)
			stream_read(run, &run->out[i], true);
		unwatch_close(run, &run->out[i].fd);
		run->out[i].eof = true;
	}
	run_check(run, now);
}

void bk_run_drop(bk_run *run)
{
	if (run->spawning) {
		run->dropped = true;
		return;
	}
	if (!run->live)
		return;
	if (!run->exited)
		bk_run_signal(run, SIGKILL, NULL, NULL);
	close_all(run);
	run->live = false;
	run->grace_at = 0;
	list_remove(run->rs, run);
}

void bk_run_free(bk_run *run)
{
	bk_runs *rs = run->rs;

	/* The rings go now; the record once the I/O thread's batch that may still name it is over. */
	for (int i = 0; i < 2; i++) {
		bk_ring_free(run->out[i].ring);
		bk_marks_free(run->out[i].marks);
		run->out[i].ring = NULL;
		run->out[i].marks = NULL;
	}
	run->next = rs->dead;
	rs->dead = run;
}

/* --- the I/O thread -------------------------------------------------------------------------- */

static void on_event(struct bk_run_watch *w, int64_t now)
{
	bk_run *run = w->run;

	if (!run->live)
		return;
	if (w->kind == WATCH_STDIN)
		stdin_pump(run);
	else
		stream_read(run, &run->out[w->kind == WATCH_STDOUT ? 0 : 1], false);
	run_check(run, now);
}

/* Every deadline that has come: the graces after exits, the owners' deadlines, the waiting
 * calls'. The time to the next one (ms), or -1; rs->wakes_at is when that is. */
static int deadlines(bk_runs *rs, int64_t now)
{
	int64_t next = INT64_MAX;

#define NEXT(t)                                                                                            \
	do {                                                                                               \
		if ((t) && (t) < next)                                                                     \
			next = (t);                                                                        \
	} while (0)
	for (bk_run *run = rs->runs, *following; run; run = following) {
		following = run->next;
		if (!run->live)
			continue;
		if (run->grace_at && now >= run->grace_at)
			grace_over(run, now);
		if (run->live && run->due && now >= run->due)
			run->ops->due(run, now);
		if (!run->live)
			continue;
		if (run->waiters)
			bk_run_notify(run, now, false);
		NEXT(run->grace_at);
		NEXT(run->due);
		for (bk_run_waiter *w = run->waiters; w; w = w->next)
			NEXT(w->deadline_ms);
	}
#undef NEXT
	if (next == INT64_MAX) {
		rs->wakes_at = 0;
		return -1;
	}
	rs->wakes_at = next;
	return next <= now ? 0 : (int)(next - now > INT32_MAX ? INT32_MAX : next - now);
}

static void free_dead(bk_runs *rs)
{
	while (rs->dead) {
		bk_run *next = rs->dead->next;
		rs->dead->ops->free(rs->dead);
		rs->dead = next;
	}
}

static void *io_main(void *arg)
{
	bk_runs *rs = arg;
	int timeout = -1;

	for (;;) {
		struct epoll_event evs[64];
		int n = epoll_wait(rs->epfd, evs, 64, timeout);
		int64_t now = bk_clock_monotonic_ms();
		bool stop;

		bk_runs_lock(rs);
		for (int i = 0; i < n; i++) {
			if (evs[i].data.ptr == &wake_watch) {
				uint64_t count;
				if (read(rs->wake_fd, &count, sizeof(count)) < 0 && errno != EAGAIN)
					bk_log(BK_LOG_ERROR, "runs: wake-up read: %s", strerror(errno));
			} else {
				on_event(evs[i].data.ptr, now);
			}
		}
		timeout = deadlines(rs, now);
		free_dead(rs);
		stop = rs->stopping;
		bk_runs_unlock(rs);
		if (stop)
			return NULL;
	}
}

int bk_runs_start(bk_server *srv, bk_error **err)
{
	bk_runs *rs = calloc(1, sizeof(*rs));
	int rv;

	if (!rs)
		return bk_error_errno(err, ENOMEM, "runs");
	srv->runs = rs;
	rs->srv = srv;
	pthread_mutex_init(&rs->lock, NULL);
	rs->epfd = epoll_create1(EPOLL_CLOEXEC);
	rs->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (rs->epfd < 0 || rs->wake_fd < 0 ||
	    epoll_ctl(rs->epfd, EPOLL_CTL_ADD, rs->wake_fd,
		      &(struct epoll_event){ .events = EPOLLIN, .data.ptr = &wake_watch }) < 0)
		return bk_error_errno(err, errno, "the runs' I/O set-up");
	rv = pthread_create(&rs->thread, NULL, io_main, rs);
	if (rv)
		return bk_error_errno(err, rv, "the runs' I/O thread");
	rs->thread_started = true;
	return 0;
}

void bk_runs_stop(bk_server *srv)
{
	bk_runs *rs = srv->runs;

	if (!rs)
		return;
	if (rs->thread_started) {
		bk_runs_lock(rs);
		rs->stopping = true;
		wake(rs);
		bk_runs_unlock(rs);
		pthread_join(rs->thread, NULL);
	}
	bk_runs_lock(rs);
	free_dead(rs);
	bk_runs_unlock(rs);
	bk_close(rs->epfd);
	bk_close(rs->wake_fd);
	pthread_mutex_destroy(&rs->lock);
	free(rs);
	srv->runs = NULL;
}
