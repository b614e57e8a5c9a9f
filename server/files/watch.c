#include "files/watch.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "clock.h"
#include "cleanup.h"
#include "files/files.h"
#include "log.h"
#include "utf8.h"

enum {
	END_NONE = BOXKITE__V1__WATCH_END__WATCH_END_NONE,
	END_EXPIRED = BOXKITE__V1__WATCH_END__WATCH_END_EXPIRED,
	END_RESET = BOXKITE__V1__WATCH_END__WATCH_END_RESET,
	END_REMOVED = BOXKITE__V1__WATCH_END__WATCH_END_REMOVED,
	END_LIMIT = BOXKITE__V1__WATCH_END__WATCH_END_LIMIT,
	END_STOPPED = BOXKITE__V1__WATCH_END__WATCH_END_STOPPED,
	KIND_CREATED = BOXKITE__V1__WATCH_EVENT_KIND__WATCH_EVENT_KIND_CREATED,
	KIND_MODIFIED = BOXKITE__V1__WATCH_EVENT_KIND__WATCH_EVENT_KIND_MODIFIED,
	KIND_OVERFLOW = BOXKITE__V1__WATCH_EVENT_KIND__WATCH_EVENT_KIND_OVERFLOW,
};

/* A watch's events: BK_WATCH_EVENTS_MAX, and the OVERFLOW event that counts what came past them.
 * A second OVERFLOW at the tail can only follow once the first was read, which takes a read from
 * at most BK_WATCH_READ_MAX events before it — and that read made room: one slot to spare. */
#define RING_SLOTS (BK_WATCH_EVENTS_MAX + 2)
/* SESSION.WATCH.SEQ: 16 hex digits, two numbers of at most 20 digits, two dots. */
#define CURSOR_MAX 64

/* One event kept for the watch's reader: its paths' exact bytes. */
struct event {
	uint32_t kind;
	bool dir;
	uint64_t lost;
	size_t path_len, to_len;
	char bytes[]; /* path, NUL, to, NUL */
};

/* A read waiting (parked) for an event, the watch's end or its deadline. */
struct waiter {
	struct waiter *next;
	bk_call *call;
	uint64_t from;
	uint32_t max;
	int64_t deadline_ms;
};

struct watch {
	struct watch *next;
	uint64_t key;        /* the file worker's id for it: never used twice by this front */
	uint64_t number;     /* the cursor's, within its session */
	bool started;        /* the worker answered its Watch */
	bool worker_has;     /* the worker watches it: an Unwatch when it goes */
	int end;             /* the worker ended it (REMOVED, LIMIT): its reads end once they reach it */
	bool gone;           /* its end was read: it goes */
	struct event **ring; /* RING_SLOTS */
	size_t head, count, bytes;
	uint64_t first;      /* the number of ring[head] */
	uint64_t handed;     /* one past the last event an answer gave: those are never changed */
	struct waiter *waiters;
	int64_t idle_at;     /* CLOCK_MONOTONIC ms: it goes if no read came by then */
};

struct bk_watches {
	pthread_mutex_t lock; /* everything below */
	pthread_cond_t cond;  /* the timer's: an earlier deadline (kick), or the stop */
	pthread_t timer;
	bool timer_started, stopping, kick;
	struct watch *list;
	size_t n;
	uint64_t session, prev_session; /* random: the cursors' first part */
	uint64_t next_number, next_key;
};

/* An answer made under the lock, sent once it is let go. */
struct answer {
	struct answer *next;
	bk_call *call;
	int status;          /* BK_OK: resp; otherwise message */
	char message[256];
	Boxkite__V1__FileWatchResponse resp;
	Boxkite__V1__WatchEvent *events, **ptrs;
	char *strings;
	char cursor[CURSOR_MAX];
};

/* What a pass under the lock leaves to do once it is let go. */
struct outbox {
	struct answer *answers, **tail;
	uint64_t unwatch[BK_WATCHES_MAX];
	size_t nunwatch;
};

static void outbox_init(struct outbox *out)
{
	out->answers = NULL;
	out->tail = &out->answers;
	out->nunwatch = 0;
}

static void answer_free(struct answer *a)
{
	free(a->events);
	free(a->ptrs);
	free(a->strings);
	free(a);
}

static void post(struct outbox *out, struct answer *a)
{
	*out->tail = a;
	out->tail = &a->next;
}

/* An error answer; out of memory for it, the call is failed with a fixed message instead. */
static void post_fail(struct outbox *out, bk_call *call, int status, const char *fmt, ...) BK_PRINTF(4, 5);
static void post_fail(struct outbox *out, bk_call *call, int status, const char *fmt, ...)
{
	struct answer *a = calloc(1, sizeof(*a));
	va_list ap;

	if (!a) {
		bk_call_failf(call, BK_RESOURCE_EXHAUSTED, 0, "out of memory");
		return;
	}
	a->call = call;
	a->status = status;
	va_start(ap, fmt);
	vsnprintf(a->message, sizeof(a->message), fmt, ap);
	va_end(ap);
	post(out, a);
}

static void unwatched(void *arg, int err, bk_reply *reply, int *fds, size_t nfds)
{
	(void)arg;
	(void)err;
	(void)fds;
	(void)nfds;
	bk_reply_free(reply);
}

static void send_unwatch(bk_server *srv, uint64_t key)
{
	Boxkite__Executor__Unwatch u = BOXKITE__EXECUTOR__UNWATCH__INIT;
	bk_order order = BOXKITE__EXECUTOR__ORDER__INIT;

	u.watch = key;
	order.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_UNWATCH;
	order.unwatch = &u;
	/* Past the queue's bound: a watch the worker kept for want of room would hold one of the
	 * sandbox's instances until its next Reset. */
	bk_link_send(srv->files_link, &order, NULL, 0, BK_LINK_URGENT, unwatched, NULL);
}

/* Without the lock: the answers, and the worker told what it may drop. */
static void outbox_send(bk_server *srv, struct outbox *out)
{
	for (struct answer *a = out->answers, *next; a; a = next) {
		next = a->next;
		if (a->status)
			bk_call_failf(a->call, a->status, 0, "%s", a->message);
		else
			bk_call_reply(a->call, &a->resp.base);
		answer_free(a);
	}
	for (size_t i = 0; i < out->nunwatch; i++)
		send_unwatch(srv, out->unwatch[i]);
	outbox_init(out);
}

/* --- a watch's events ---------------------------------------------------------------------- */

static struct event *event_at(const struct watch *w, size_t i)
{
	return w->ring[(w->head + i) % RING_SLOTS];
}

/* The events before `upto` were received: they go. */
static void ack(struct watch *w, uint64_t upto)
{
	while (w->count && w->first < upto) {
		struct event *e = w->ring[w->head];
		w->bytes -= e->path_len + e->to_len;
		free(e);
		w->ring[w->head] = NULL;
		w->head = (w->head + 1) % RING_SLOTS;
		w->count--;
		w->first++;
	}
}

static void cursor_format(char *out, uint64_t session, uint64_t number, uint64_t seq)
{
	snprintf(out, CURSOR_MAX, "%016" PRIx64 ".%" PRIu64 ".%" PRIu64, session, number, seq);
}

/* SESSION.WATCH.SEQ, exactly as cursor_format() writes it. */
static bool cursor_parse(const char *s, uint64_t *session, uint64_t *number, uint64_t *seq)
{
	char again[CURSOR_MAX];
	char *end;

	if (strlen(s) >= CURSOR_MAX || strlen(s) < 20 || s[16] != '.')
		return false;
	for (int i = 0; i < 16; i++)
		if (!strchr("0123456789abcdef", s[i]) || !s[i])
			return false;
	*session = strtoull(s, NULL, 16);
	if (s[17] < '0' || s[17] > '9')
		return false;
	errno = 0;
	*number = strtoull(s + 17, &end, 10);
	if (errno || *end != '.' || end[1] < '0' || end[1] > '9')
		return false;
	*seq = strtoull(end + 1, &end, 10);
	if (errno || *end)
		return false;
	/* No leading zeros, no sign, no space: one spelling per cursor. */
	cursor_format(again, *session, *number, *seq);
	return strcmp(again, s) == 0;
}

/* Copy `len` bytes of s into *at as a string; a protobuf string must be UTF-8, so one that is not
 * is shown escaped (\xNN) and its exact bytes go in raw. Returns the string. */
static char *wire_copy(char **at, const char *s, size_t len, ProtobufCBinaryData *raw)
{
	char *copy = *at, *shown;

	memcpy(copy, s, len);
	copy[len] = '\0';
	*at += len + 1;
	if (bk_utf8_valid(copy))
		return copy;
	shown = *at;
	bk_utf8_escape(copy, shown, 4 * len + 1);
	*at += strlen(shown) + 1;
	*raw = (ProtobufCBinaryData){ .len = len, .data = (uint8_t *)copy };
	return shown;
}

/* The answer to a read of w from event `from`: at most max events (and BK_WATCH_READ_BYTES of
 * their paths), and the watch's end when they reach it. */
static void answer_end(bk_call *call, const char *cursor, int end, struct outbox *out);

static void answer_from(bk_watches *ws, struct watch *w, bk_call *call, uint64_t from, uint32_t max,
			struct outbox *out)
{
	size_t avail, n = 0, raw = 0, strings = 1;
	struct answer *a;
	char *at;

	if (from < w->first) {
		/* Events it asks for are gone. A read checks this before it waits, and a waiting read
		 * asks from the watch's end, which acknowledgements never pass: kept as the one guard
		 * between a cursor and the ring's index. */
		char cursor[CURSOR_MAX];
		cursor_format(cursor, ws->session, w->number, from);
		answer_end(call, cursor, END_EXPIRED, out);
		return;
	}
	avail = w->first + w->count - from;
	a = calloc(1, sizeof(*a));

	while (n < avail && n < max) {
		const struct event *e = event_at(w, from - w->first + n);
		if (n && raw + e->path_len + e->to_len > BK_WATCH_READ_BYTES)
			break;
		raw += e->path_len + e->to_len;
		strings += 5 * (e->path_len + e->to_len) + 4;
		n++;
	}
	if (!a || (n && (!(a->events = calloc(n, sizeof(*a->events))) || !(a->ptrs = calloc(n, sizeof(*a->ptrs))))) ||
	    !(a->strings = malloc(strings))) {
		if (a)
			answer_free(a);
		post_fail(out, call, BK_RESOURCE_EXHAUSTED, "out of memory for the answer");
		return;
	}
	boxkite__v1__file_watch_response__init(&a->resp);
	at = a->strings;
	for (size_t i = 0; i < n; i++) {
		const struct event *e = event_at(w, from - w->first + i);
		Boxkite__V1__WatchEvent *ev = &a->events[i];

		boxkite__v1__watch_event__init(ev);
		ev->kind = (Boxkite__V1__WatchEventKind)e->kind;
		ev->directory = e->dir;
		ev->lost = e->lost;
		ev->path = wire_copy(&at, e->bytes, e->path_len, &ev->raw_path);
		ev->to = wire_copy(&at, e->bytes + e->path_len + 1, e->to_len, &ev->raw_to);
		a->ptrs[i] = ev;
	}
	a->call = call;
	a->resp.n_events = n;
	a->resp.events = a->ptrs;
	cursor_format(a->cursor, ws->session, w->number, from + n);
	a->resp.cursor = a->cursor;
	if (n == avail && w->end) {
		a->resp.end = (Boxkite__V1__WatchEnd)w->end;
		w->gone = true;
	}
	if (from + n > w->handed)
		w->handed = from + n;
	w->idle_at = bk_clock_monotonic_ms() + BK_WATCH_IDLE_MS;
	post(out, a);
}

/* An answer that is only an end (the cursor given back as it came). */
static void answer_end(bk_call *call, const char *cursor, int end, struct outbox *out)
{
	struct answer *a = calloc(1, sizeof(*a));

	if (!a) {
		post_fail(out, call, BK_RESOURCE_EXHAUSTED, "out of memory for the answer");
		return;
	}
	boxkite__v1__file_watch_response__init(&a->resp);
	a->call = call;
	snprintf(a->cursor, sizeof(a->cursor), "%s", cursor);
	a->resp.cursor = a->cursor;
	a->resp.end = (Boxkite__V1__WatchEnd)end;
	post(out, a);
}

static bool has_answer(const struct watch *w, uint64_t from)
{
	return from < w->first + w->count || w->end;
}

/* Answer the waiting reads that have their answer now. */
static void wake(bk_watches *ws, struct watch *w, struct outbox *out)
{
	for (struct waiter **pp = &w->waiters; *pp;) {
		struct waiter *x = *pp;

		if (!has_answer(w, x->from)) {
			pp = &x->next;
			continue;
		}
		*pp = x->next;
		answer_from(ws, w, x->call, x->from, x->max, out);
		free(x);
	}
}

static void watch_free(struct watch *w)
{
	for (size_t i = 0; i < w->count; i++)
		free(event_at(w, i));
	free(w->ring);
	free(w);
}

/* Take w out of the list and free it (its waiters answered already); the worker is told to drop
 * it when it still watches it. */
static void watch_drop(bk_watches *ws, struct watch *w, struct outbox *out)
{
	for (struct watch **pp = &ws->list; *pp; pp = &(*pp)->next) {
		if (*pp == w) {
			*pp = w->next;
			ws->n--;
			break;
		}
	}
	if (w->worker_has && out->nunwatch < BK_WATCHES_MAX)
		out->unwatch[out->nunwatch++] = w->key;
	watch_free(w);
}

/* End w now, whatever it holds: each waiting read answered `end` (or failed with status), and w
 * goes. */
static void watch_finish(bk_watches *ws, struct watch *w, int end, int status, struct outbox *out)
{
	while (w->waiters) {
		struct waiter *x = w->waiters;
		char cursor[CURSOR_MAX];

		w->waiters = x->next;
		cursor_format(cursor, ws->session, w->number, x->from);
		if (status)
			post_fail(out, x->call, status, "boxkited is shutting down");
		else
			answer_end(x->call, cursor, end, out);
		free(x);
	}
	watch_drop(ws, w, out);
}

/* Drop the watches whose end was read. */
static void sweep(bk_watches *ws, struct outbox *out)
{
	for (struct watch *w = ws->list, *next; w; w = next) {
		next = w->next;
		if (w->gone && !w->waiters)
			watch_drop(ws, w, out);
	}
}

/* One change from the worker, kept — or counted in an OVERFLOW event when the watch holds as much
 * as it may. false when there was no memory for it (the watch then ends). */
static bool keep(struct watch *w, uint32_t kind, const uint8_t *path, size_t plen, const uint8_t *to, size_t tlen,
		 bool dir, uint64_t lost)
{
	struct event *tail = w->count ? event_at(w, w->count - 1) : NULL;
	/* The tail may still change while no answer gave it. */
	bool open = tail && w->first + w->count - 1 >= w->handed;
	bool full = w->count >= BK_WATCH_EVENTS_MAX || w->bytes + plen + tlen > BK_WATCH_BYTES_MAX;
	struct event *e;

	if (kind == KIND_OVERFLOW || full) {
		if (kind != KIND_OVERFLOW)
			lost = 1;
		if (open && tail->kind == KIND_OVERFLOW) {
			/* 0 says unknown (the kernel's queue overflowed): a sum with it is unknown too. */
			tail->lost = tail->lost && lost ? tail->lost + lost : 0;
			return true;
		}
		kind = KIND_OVERFLOW;
		plen = tlen = 0;
		dir = false;
	} else if (kind == KIND_MODIFIED && open && tail->kind == KIND_MODIFIED && tail->path_len == plen &&
		   memcmp(tail->bytes, path, plen) == 0) {
		return true; /* writes in a row to one file: one event */
	} else {
		lost = 0;
	}
	if (w->count == RING_SLOTS || !(e = malloc(sizeof(*e) + plen + tlen + 2)))
		return false;
	e->kind = kind;
	e->dir = dir;
	e->lost = lost;
	e->path_len = plen;
	e->to_len = tlen;
	if (plen)
		memcpy(e->bytes, path, plen);
	e->bytes[plen] = '\0';
	if (tlen)
		memcpy(e->bytes + plen + 1, to, tlen);
	e->bytes[plen + 1 + tlen] = '\0';
	w->ring[(w->head + w->count) % RING_SLOTS] = e;
	w->count++;
	w->bytes += plen + tlen;
	return true;
}

/* A path from the worker, which is the sandbox user: bytes of a sandbox path, no NUL. */
static bool path_fits(const ProtobufCBinaryData *p)
{
	return p->len < PATH_MAX && (!p->len || !memchr(p->data, '\0', p->len));
}

/* --- the timer: reads' deadlines, idle watches ------------------------------------------------- */

static void *timer_main(void *arg)
{
	bk_server *srv = arg;
	bk_watches *ws = srv->watches;
	struct outbox out;

	outbox_init(&out);
	pthread_mutex_lock(&ws->lock);
	while (!ws->stopping) {
		int64_t now = bk_clock_monotonic_ms(), next = now + BK_WATCH_IDLE_MS;
		struct timespec until;

		for (struct watch *w = ws->list, *wnext; w; w = wnext) {
			wnext = w->next;
			for (struct waiter **pp = &w->waiters; *pp;) {
				struct waiter *x = *pp;
				if (x->deadline_ms > now) {
					next = x->deadline_ms < next ? x->deadline_ms : next;
					pp = &x->next;
					continue;
				}
				*pp = x->next;
				answer_from(ws, w, x->call, x->from, x->max, &out);
				free(x);
			}
			/* Not read for BK_WATCH_IDLE_MS: its reader went away. */
			if (!w->waiters && w->started && w->idle_at <= now)
				watch_drop(ws, w, &out);
			else if (!w->waiters && w->started && w->idle_at < next)
				next = w->idle_at;
		}
		sweep(ws, &out);
		if (out.answers || out.nunwatch) {
			pthread_mutex_unlock(&ws->lock);
			outbox_send(srv, &out);
			pthread_mutex_lock(&ws->lock);
			continue;
		}
		if (ws->kick) {
			ws->kick = false;
			continue;
		}
		until.tv_sec = next / 1000;
		until.tv_nsec = (next % 1000) * 1000000L;
		pthread_cond_timedwait(&ws->cond, &ws->lock, &until);
	}
	pthread_mutex_unlock(&ws->lock);
	return NULL;
}

/* The timer has a new deadline to see (the lock held). */
static void kick(bk_watches *ws)
{
	ws->kick = true;
	pthread_cond_signal(&ws->cond);
}

static uint64_t session_new(void)
{
	uint64_t s = 0;

	while (getrandom(&s, sizeof(s), 0) != (ssize_t)sizeof(s))
		;
	return s;
}

int bk_watches_start(bk_server *srv, bk_error **err)
{
	bk_watches *ws = calloc(1, sizeof(*ws));
	pthread_condattr_t attr;

	if (!ws)
		return bk_error_errno(err, ENOMEM, "watches");
	pthread_mutex_init(&ws->lock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&ws->cond, &attr);
	pthread_condattr_destroy(&attr);
	ws->session = session_new();
	srv->watches = ws;
	if (pthread_create(&ws->timer, NULL, timer_main, srv) != 0) {
		bk_watches_free(srv);
		return bk_error_errno(err, EAGAIN, "the watches' timer thread");
	}
	ws->timer_started = true;
	return 0;
}

void bk_watches_stop(bk_server *srv)
{
	bk_watches *ws = srv->watches;
	struct outbox out;

	if (!ws)
		return;
	outbox_init(&out);
	pthread_mutex_lock(&ws->lock);
	ws->stopping = true;
	while (ws->list) {
		ws->list->worker_has = false; /* the link is closed: no Unwatch */
		watch_finish(ws, ws->list, END_NONE, BK_UNAVAILABLE, &out);
	}
	pthread_cond_signal(&ws->cond);
	pthread_mutex_unlock(&ws->lock);
	outbox_send(srv, &out);
	if (ws->timer_started)
		pthread_join(ws->timer, NULL);
	ws->timer_started = false;
}

void bk_watches_free(bk_server *srv)
{
	bk_watches *ws = srv->watches;

	if (!ws)
		return;
	bk_watches_stop(srv);
	pthread_cond_destroy(&ws->cond);
	pthread_mutex_destroy(&ws->lock);
	free(ws);
	srv->watches = NULL;
}

/* --- from the worker and the reset ------------------------------------------------------------ */

void bk_watches_changes(bk_server *srv, const Boxkite__Executor__Changes *ch)
{
	bk_watches *ws = srv->watches;
	struct watch *w;
	struct outbox out;
	size_t refused = 0;

	if (!ws)
		return;
	outbox_init(&out);
	pthread_mutex_lock(&ws->lock);
	for (w = ws->list; w && w->key != ch->watch; w = w->next)
		; /* none once stopping: the list is empty */
	/* None: stopped, expired or reset meanwhile; what the worker sent before it heard is moot. */
	for (size_t i = 0; w && !w->end && i < ch->n_changes; i++) {
		const Boxkite__Executor__Change *c = ch->changes[i];
		if (c->kind < KIND_CREATED || c->kind > KIND_OVERFLOW || !path_fits(&c->path) || !path_fits(&c->to)) {
			refused++;
			continue;
		}
		if (!keep(w, c->kind, c->path.data, c->path.len, c->to.data, c->to.len, c->directory, c->lost)) {
			bk_log(BK_LOG_ERROR, "watch %" PRIu64 ": no memory for its events: it ends", w->number);
			w->end = END_EXPIRED;
		}
	}
	if (w && !w->end && ch->end) {
		/* The worker has forgotten it. */
		w->worker_has = false;
		w->end = ch->end == END_REMOVED || ch->end == END_LIMIT ? (int)ch->end : END_EXPIRED;
	}
	if (w)
		wake(ws, w, &out);
	sweep(ws, &out);
	pthread_mutex_unlock(&ws->lock);
	outbox_send(srv, &out);
	if (refused)
		bk_log(BK_LOG_ERROR, "the file worker sent %zu changes that are not ones it makes", refused);
}

void bk_watches_worker_lost(bk_server *srv)
{
	bk_watches *ws = srv->watches;
	struct outbox out;

	if (!ws)
		return;
	outbox_init(&out);
	pthread_mutex_lock(&ws->lock);
	/* Those it answered are gone with it; a start still waiting for its answer gets one (from a
	 * new worker, or EPIPE). The Unwatch each is sent reaches the next worker: harmless there,
	 * and it drops a watch that raced this news. */
	for (struct watch *w = ws->list, *next; w; w = next) {
		next = w->next;
		if (w->started)
			watch_finish(ws, w, END_EXPIRED, 0, &out);
	}
	pthread_mutex_unlock(&ws->lock);
	outbox_send(srv, &out);
}

void bk_watches_reset(bk_server *srv)
{
	bk_watches *ws = srv->watches;
	struct outbox out;

	if (!ws)
		return;
	outbox_init(&out);
	pthread_mutex_lock(&ws->lock);
	while (ws->list) {
		/* The worker drops them all at the Wipe, before anything of it could be reported. */
		ws->list->worker_has = false;
		watch_finish(ws, ws->list, END_RESET, 0, &out);
	}
	/* A new session: no cursor of the last tenant's names a watch of the next, and the watches'
	 * numbers start again. */
	ws->prev_session = ws->session;
	ws->session = session_new();
	ws->next_number = 0;
	pthread_mutex_unlock(&ws->lock);
	outbox_send(srv, &out);
}

/* --- the rpc -------------------------------------------------------------------------------- */

struct start {
	bk_call *call;
	uint64_t key;
	char path[PATH_MAX];
};

static void watch_started(void *arg, int err, bk_reply *reply, int *fds, size_t nfds)
{
	struct start *s = arg;
	bk_server *srv = s->call->srv;
	bk_watches *ws = srv->watches;
	struct watch *w;
	struct outbox out;

	(void)fds;
	(void)nfds;
	outbox_init(&out);
	pthread_mutex_lock(&ws->lock);
	for (w = ws->list; w && w->key != s->key; w = w->next)
		;
	if (ws->stopping) {
		if (!err && out.nunwatch < BK_WATCHES_MAX)
			out.unwatch[out.nunwatch++] = s->key;
		post_fail(&out, s->call, BK_UNAVAILABLE, "boxkited is shutting down");
	} else if (err) {
		if (w)
			watch_drop(ws, w, &out);
		if (reply && (err == ENOSPC || err == EMFILE))
			post_fail(&out, s->call, BK_RESOURCE_EXHAUSTED, "watch %.200s: %s (the watches of a sandbox hold "
				  "%d directories and %d watches at most)", s->path, reply->message, BK_WATCH_DIRS_MAX,
				  BK_WATCHES_MAX);
	} else if (!w) {
		/* A Reset ended it while the worker was starting it. */
		if (out.nunwatch < BK_WATCHES_MAX)
			out.unwatch[out.nunwatch++] = s->key;
		post_fail(&out, s->call, BK_ABORTED, "a Reset ended the watch of %.200s as it started", s->path);
	} else {
		struct answer *a = calloc(1, sizeof(*a));
		w->started = w->worker_has = true;
		w->idle_at = bk_clock_monotonic_ms() + BK_WATCH_IDLE_MS;
		kick(ws);
		if (!a) {
			post_fail(&out, s->call, BK_RESOURCE_EXHAUSTED, "out of memory for the answer");
		} else {
			boxkite__v1__file_watch_response__init(&a->resp);
			a->call = s->call;
			cursor_format(a->cursor, ws->session, w->number, 0);
			a->resp.cursor = a->cursor;
			a->resp.directories = (uint32_t)reply->done->count;
			post(&out, a);
		}
	}
	pthread_mutex_unlock(&ws->lock);
	if (err && !out.answers)
		bk_files_fail_reply(s->call, err, reply);
	outbox_send(srv, &out);
	bk_reply_free(reply);
	free(s);
}

static void watch_start(bk_call *call, const Boxkite__V1__FileWatchRequest *rq)
{
	bk_watches *ws = call->srv->watches;
	Boxkite__Executor__Watch op = BOXKITE__EXECUTOR__WATCH__INIT;
	bk_order order = BOXKITE__EXECUTOR__ORDER__INIT;
	struct watch *w;
	struct start *s;

	if (!(s = calloc(1, sizeof(*s)))) {
		bk_call_failf(call, BK_RESOURCE_EXHAUSTED, 0, "out of memory");
		return;
	}
	if (!bk_files_path_ok(call, rq->path, s->path, sizeof(s->path), NULL)) {
		free(s);
		return;
	}
	if (rq->stop) {
		free(s);
		bk_call_failf(call, BK_INVALID_ARGUMENT, 0, "stop: give the cursor of the watch to stop, not a path");
		return;
	}
	pthread_mutex_lock(&ws->lock);
	if (ws->stopping) {
		pthread_mutex_unlock(&ws->lock);
		free(s);
		bk_call_failf(call, BK_UNAVAILABLE, 0, "boxkited is shutting down");
		return;
	}
	if (ws->n >= BK_WATCHES_MAX) {
		pthread_mutex_unlock(&ws->lock);
		free(s);
		bk_call_failf(call, BK_RESOURCE_EXHAUSTED, 0,
			      "the sandbox has %d watches, the most it may: stop one (FileWatch with its cursor and "
			      "stop) or let one expire (%d s unread)",
			      BK_WATCHES_MAX, BK_WATCH_IDLE_MS / 1000);
		return;
	}
	if (!(w = calloc(1, sizeof(*w))) || !(w->ring = calloc(RING_SLOTS, sizeof(*w->ring)))) {
		pthread_mutex_unlock(&ws->lock);
		free(w);
		free(s);
		bk_call_failf(call, BK_RESOURCE_EXHAUSTED, 0, "out of memory");
		return;
	}
	w->key = ++ws->next_key;
	w->number = ++ws->next_number;
	w->next = ws->list;
	ws->list = w;
	ws->n++;
	pthread_mutex_unlock(&ws->lock);
	s->call = call;
	s->key = w->key;
	op.watch = w->key;
	op.path = s->path;
	order.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_WATCH;
	order.watch = &op;
	bk_link_send(call->srv->files_link, &order, NULL, 0, 0, watch_started, s);
}

static void watch_read(bk_call *call, const Boxkite__V1__FileWatchRequest *rq)
{
	bk_watches *ws = call->srv->watches;
	uint64_t session, number, seq;
	uint32_t max = rq->max_events ? rq->max_events : BK_WATCH_READ_MAX;
	struct watch *w;
	struct outbox out;

	if (!cursor_parse(rq->cursor, &session, &number, &seq)) {
		bk_call_failf(call, BK_INVALID_ARGUMENT, 0, "'%.80s' is not a cursor from a FileWatch answer", rq->cursor);
		return;
	}
	if (rq->max_events > BK_WATCH_READ_MAX) {
		bk_call_failf(call, BK_INVALID_ARGUMENT, 0, "max_events %u: at most %d", rq->max_events, BK_WATCH_READ_MAX);
		return;
	}
	outbox_init(&out);
	pthread_mutex_lock(&ws->lock);
	for (w = ws->list; w && (session != ws->session || w->number != number); w = w->next)
		;
	if (ws->stopping) {
		post_fail(&out, call, BK_UNAVAILABLE, "boxkited is shutting down");
	} else if (!w || !w->started || w->gone) {
		/* The last session's: a Reset ended it. Any other unknown: expired, stopped, or of a
		 * boxkited before a restart. */
		answer_end(call, rq->cursor, session == ws->prev_session && ws->prev_session ? END_RESET : END_EXPIRED,
			   &out);
	} else if (rq->stop) {
		watch_finish(ws, w, END_STOPPED, 0, &out);
		answer_end(call, rq->cursor, END_STOPPED, &out);
	} else if (seq > w->first + w->count) {
		post_fail(&out, call, BK_INVALID_ARGUMENT, "cursor %.80s is past the watch's last event", rq->cursor);
	} else if (seq < w->first) {
		/* Events it has dropped since (a later cursor said they were received): the reader
		 * cannot know what it missed. */
		answer_end(call, rq->cursor, END_EXPIRED, &out);
	} else {
		uint32_t wait = rq->wait_ms > BK_WATCH_WAIT_MAX_MS ? BK_WATCH_WAIT_MAX_MS : rq->wait_ms;
		struct waiter *x = NULL;

		ack(w, seq);
		/* Nothing yet: wait, parked (its context back to the pool) — unless the transport has
		 * parked as many as it may, or there is no memory to wait with: then the answer is now. */
		if (!has_answer(w, seq) && wait && (x = calloc(1, sizeof(*x))) && bk_call_park(call)) {
			*x = (struct waiter){ .next = w->waiters, .call = call, .from = seq, .max = max,
					      .deadline_ms = bk_clock_monotonic_ms() + wait };
			w->waiters = x;
			kick(ws);
		} else {
			free(x);
			answer_from(ws, w, call, seq, max, &out);
		}
	}
	sweep(ws, &out);
	pthread_mutex_unlock(&ws->lock);
	outbox_send(call->srv, &out);
}

void bk_handle_file_watch(bk_call *call, const ProtobufCMessage *request)
{
	const Boxkite__V1__FileWatchRequest *rq = (const Boxkite__V1__FileWatchRequest *)request;

	if (!bk_files_ready(call))
		return;
	if (!call->srv->watches)
		bk_call_failf(call, BK_UNAVAILABLE, 0, "this server does not serve watches");
	else if (rq->path[0] && rq->cursor[0])
		bk_call_failf(call, BK_INVALID_ARGUMENT, 0, "a path to start a watch, or a cursor to read one: not both");
	else if (rq->path[0])
		watch_start(call, rq);
	else if (rq->cursor[0])
		watch_read(call, rq);
	else
		bk_call_failf(call, BK_INVALID_ARGUMENT, 0, "a path to start a watch, or a cursor to read one");
}
