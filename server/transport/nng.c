/* The transport: one nng REP socket listening on every configured URL, and a fixed pool of
 * contexts, each an aio state machine (receive → dispatch → send → receive). A context serves one
 * request at a time, so the pool size is the admission limit: request number N+1 waits in nng
 * until a context frees up. Callbacks never block; a handler that takes time ends its call later
 * from another thread, which sends the answer on the call's context.
 *
 * A call that waits for something to happen (a long-poll) is parked: its context stays with it
 * until it is answered, and a spare one takes its place in receiving, so the pool keeps serving.
 * Once a parked call's answer is sent its context becomes a spare, for the next to park. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "clock.h"
#include "log.h"
#include "mkdir.h"
#include "nngclose.h"
#include "rpc/call.h"

#include <nng/protocol/reqrep0/rep.h>

enum slot_state { SLOT_RECV, SLOT_SEND };

struct slot {
	bk_server *srv;
	nng_ctx ctx;
	nng_aio *aio;
	nng_pipe pipe;          /* the connection its call came on */
	enum slot_state state;
	bool parked;            /* its call waits: once answered, the slot is a spare */
	struct slot *next;      /* in front.spares, or (for every extra slot) front.extras */
	struct slot *next_extra;
	bk_call call;
};

/* A connection the front holds, for the cap. */
struct conn {
	int pipe;               /* nng_pipe_id */
	uint64_t seq;           /* order of arrival */
	int64_t since;          /* its arrival, ms */
	uint8_t source[17];     /* where it comes from: family, then an IPv4 address or an IPv6 /64 */
	unsigned busy;          /* its requests being served */
	bool keyed;             /* a fresh request with a valid MAC came on it */
};


struct front {
	nng_socket sock;
	/* Each listener's id and whether its transport keeps bytes off the network in clear. */
	struct { int id; bool private; } listeners[BK_LISTEN_MAX];
	size_t nlisteners;
	pthread_mutex_t conns_lock; /* conns, nconns, seq */
	struct conn *conns;     /* max_pipes of them */
	unsigned *order;        /* max_pipes: conn_victim's scratch */
	unsigned nconns, max_pipes;
	uint64_t seq;
	int closing[BK_FRONT_CLOSING_MAX]; /* pipes closed for a new one, until nng removes them */
	unsigned nclosing;
	unsigned long cap_events[2]; /* refused, replaced: since the last report */
	int64_t cap_logged_ms;
	struct slot *slots;
	unsigned nslots;
	pthread_mutex_t lock;
	pthread_cond_t idle;
	unsigned in_calls; /* calls handed to dispatch and not yet ended */
	struct slot *spares;  /* extra slots not in use (lock) */
	struct slot *extras;  /* every extra slot, for the stop (lock) */
	unsigned nextras;
};

static bool slot_park(bk_call *call);

/* A parked slot whose call has ended: a spare now. */
static void slot_retire(struct front *f, struct slot *s)
{
	atomic_fetch_sub_explicit(&s->srv->metrics.calls_waiting, 1, memory_order_relaxed);
	pthread_mutex_lock(&f->lock);
	s->parked = false;
	s->next = f->spares;
	f->spares = s;
	pthread_mutex_unlock(&f->lock);
}

static void slot_recv(struct slot *s)
{
	s->state = SLOT_RECV;
	nng_ctx_recv(s->ctx, s->aio);
}

static void conn_mark(struct front *f, nng_pipe p, int busy, bool keyed);

static void slot_keyed(bk_call *call)
{
	struct slot *s = call->transport;

	conn_mark(s->srv->front, s->pipe, 0, true);
}

/* Whoever asked (bk_call_on_sent) is told that the answer is the connection's now, or gone. */
static void slot_sent(struct slot *s)
{
	void (*fn)(void *) = TAKE_PTR(s->call.sent);

	if (fn)
		fn(s->call.sent_arg);
}

/* The call's end: send the answer on the context it came from, or receive again. */
static void slot_call_done(bk_call *call, nng_msg *answer)
{
	struct slot *s = call->transport;
	struct front *f = s->srv->front;

	conn_mark(f, s->pipe, -1, false);
	if (!answer) {
		slot_sent(s);
		if (s->parked)
			slot_retire(f, s);
		else
			slot_recv(s);
	} else {
		s->state = SLOT_SEND;
		nng_aio_set_msg(s->aio, answer);
		nng_ctx_send(s->ctx, s->aio);
	}
	pthread_mutex_lock(&f->lock);
	if (--f->in_calls == 0)
		pthread_cond_broadcast(&f->idle);
	pthread_mutex_unlock(&f->lock);
}

/* Whether msg came through a listener whose transport hides it from the network (ipc://,
 * tls+tcp://): a secret in its body did not cross a network in clear. */
static bool came_privately(const struct front *f, nng_msg *msg)
{
	int id = nng_listener_id(nng_pipe_listener(nng_msg_get_pipe(msg)));

	for (size_t i = 0; id > 0 && i < f->nlisteners; i++)
		if (f->listeners[i].id == id)
			return f->listeners[i].private;
	return false;
}

static void call_begins(struct front *f)
{
	pthread_mutex_lock(&f->lock);
	f->in_calls++;
	pthread_mutex_unlock(&f->lock);
}

static void slot_cb(void *arg)
{
	struct slot *s = arg;
	int rv = nng_aio_result(s->aio);

	switch (s->state) {
	case SLOT_RECV:
		if (rv == NNG_ECLOSED || rv == NNG_ECANCELED)
			return;
		if (rv != 0) {
			slot_recv(s);
			return;
		}
		call_begins(s->srv->front);
		s->pipe = nng_msg_get_pipe(nng_aio_get_msg(s->aio));
		conn_mark(s->srv->front, s->pipe, 1, false);
		memset(&s->call, 0, sizeof(s->call));
		s->call.done = slot_call_done;
		s->call.park = slot_park;
		s->call.keyed = slot_keyed;
		s->call.transport = s;
		s->call.private_channel = came_privately(s->srv->front, nng_aio_get_msg(s->aio));
		bk_server_dispatch(s->srv, &s->call, nng_aio_get_msg(s->aio));
		return;
	case SLOT_SEND:
		/* On a failed send (the peer went away) the message is still ours to free. Either way
		 * the context is done with it: the connection writes it (one answer at a time), or it
		 * is gone. */
		if (rv != 0)
			nng_msg_free(nng_aio_get_msg(s->aio));
		slot_sent(s);
		if (rv == NNG_ECLOSED || rv == NNG_ECANCELED)
			return;
		if (s->parked)
			slot_retire(s->srv->front, s);
		else
			slot_recv(s);
		return;
	}
}

static int slot_open(bk_server *srv, struct front *f, struct slot *s)
{
	int rv;

	s->srv = srv;
	if ((rv = nng_aio_alloc(&s->aio, slot_cb, s)) || (rv = nng_ctx_open(&s->ctx, f->sock)))
		return rv;
	return 0;
}

/* Hand the call's place in receiving to a spare slot (made when there is none, up to
 * BK_PARKED_MAX). */
static bool slot_park(bk_call *call)
{
	struct slot *s = call->transport, *n;
	struct front *f = s->srv->front;

	pthread_mutex_lock(&f->lock);
	n = f->spares;
	if (n) {
		f->spares = n->next;
	} else if (f->nextras < BK_PARKED_MAX && (n = calloc(1, sizeof(*n)))) {
		if (slot_open(s->srv, f, n)) {
			if (n->aio)
				nng_aio_free(n->aio);
			free(n);
			n = NULL;
		} else {
			n->next_extra = f->extras;
			f->extras = n;
			f->nextras++;
		}
	}
	pthread_mutex_unlock(&f->lock);
	if (!n)
		return false;
	s->parked = true;
	atomic_fetch_add_explicit(&s->srv->metrics.calls_waiting, 1, memory_order_relaxed);
	slot_recv(n);
	return true;
}

/* Before authentication there is nothing to tell one connection from another: what they can
 * hold is bounded by their number. Each may hold up to --max-message of a message not yet
 * received whole (nng allocates a message as its length arrives), so --max-connections x
 * --max-message is all the unauthenticated bytes the front holds, beside one message per
 * context being checked.
 *
 * At the cap, a new connection takes the place of another that neither has a request being
 * served nor has shown a key (a fresh request whose MAC verified reached its handler), from the
 * source address holding the most such connections (an IPv6 source by its /64): a client with a
 * key keeps its connection, and a client from elsewhere than a flood — Health too — is served
 * while the flood goes on. A new connection from the source that holds the most only replaces
 * one of its own idle for BK_FRONT_SAME_SOURCE_IDLE_MS, else it is refused (so a flood neither churns
 * through its own connections at its own pace nor pushes anyone out); and none is replaced
 * while BK_FRONT_CLOSING_MAX closed for others are still being freed, so the bytes held stay within
 * (max-connections + BK_FRONT_CLOSING_MAX) x max-message. Before, with the cap reached, Health and every
 * keyed client were refused until the flood ended. */
static void conn_source(nng_pipe p, uint8_t out[17])
{
	nng_sockaddr sa;

	memset(out, 0, 17);
	if (nng_pipe_get_addr(p, NNG_OPT_REMADDR, &sa) != 0)
		return;
	out[0] = (uint8_t)sa.s_family;
	if (sa.s_family == NNG_AF_INET)
		memcpy(out + 1, &sa.s_in.sa_addr, sizeof(sa.s_in.sa_addr));
	else if (sa.s_family == NNG_AF_INET6)
		memcpy(out + 1, sa.s_in6.sa_addr, 8);
}

/* Connections that may be closed for a new one, by source, then oldest first. */
static int conn_order(const void *a, const void *b, void *arg)
{
	const struct conn *conns = arg, *x = &conns[*(const unsigned *)a], *y = &conns[*(const unsigned *)b];
	int c = memcmp(x->source, y->source, sizeof(x->source));

	return c ? c : (x->seq > y->seq) - (x->seq < y->seq);
}

/* The connection to close for a new one from `source`, among those that may go (neither busy
 * nor keyed): the oldest of the source with the most of them, when that is another source;
 * when it is the new one's own, its oldest if idle BK_FRONT_SAME_SOURCE_IDLE_MS. f->max_pipes when none
 * may go. Lock held. */
static unsigned conn_victim(struct front *f, const uint8_t *source)
{
	unsigned n = 0, best = f->max_pipes, best_count = 0, own_count = 0, own_oldest = f->max_pipes;

	if (f->nclosing == BK_FRONT_CLOSING_MAX)
		return f->max_pipes;
	for (unsigned i = 0; i < f->nconns; i++)
		if (!f->conns[i].keyed && !f->conns[i].busy)
			f->order[n++] = i;
	qsort_r(f->order, n, sizeof(*f->order), conn_order, f->conns);
	for (unsigned run = 0, end; run < n; run = end) {
		const uint8_t *here = f->conns[f->order[run]].source;
		for (end = run + 1; end < n && memcmp(f->conns[f->order[end]].source, here, 17) == 0; end++)
			;
		if (memcmp(here, source, 17) == 0) {
			own_count = end - run;
			own_oldest = f->order[run];
		} else if (end - run > best_count) {
			best = f->order[run];
			best_count = end - run;
		}
	}
	if (best_count > own_count)
		return best;
	/* Half the closings are kept for other sources: a flood's own churn never uses them up. */
	if (own_oldest < f->max_pipes && f->nclosing < BK_FRONT_CLOSING_MAX / 2 &&
	    bk_clock_monotonic_ms() - f->conns[own_oldest].since >= BK_FRONT_SAME_SOURCE_IDLE_MS)
		return own_oldest;
	return f->max_pipes;
}

static void conn_mark(struct front *f, nng_pipe p, int busy, bool keyed)
{
	pthread_mutex_lock(&f->conns_lock);
	for (unsigned i = 0; i < f->nconns; i++)
		if (f->conns[i].pipe == nng_pipe_id(p)) {
			f->conns[i].busy += (unsigned)busy;
			f->conns[i].keyed |= keyed;
		}
	pthread_mutex_unlock(&f->conns_lock);
}

/* What the cap did, logged once a second at most: a flood must not fill the log too. */
static void cap_report(struct front *f, bool replaced)
{
	int64_t now = bk_clock_monotonic_ms();
	unsigned long n[2];

	pthread_mutex_lock(&f->conns_lock);
	f->cap_events[replaced]++;
	if (now - f->cap_logged_ms < 1000) {
		pthread_mutex_unlock(&f->conns_lock);
		return;
	}
	f->cap_logged_ms = now;
	n[0] = f->cap_events[0];
	n[1] = f->cap_events[1];
	f->cap_events[0] = f->cap_events[1] = 0;
	pthread_mutex_unlock(&f->conns_lock);
	bk_log(BK_LOG_WARN,
	       "%u connections already: %lu closed for new ones (without a key, from the source with the most), "
	       "%lu new ones refused, since the last report",
	       f->max_pipes, n[1], n[0]);
}

static void pipe_event(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	struct front *f = arg;
	int id = nng_pipe_id(p), victim = 0;
	uint8_t source[17];
	bool refused = false;

	if (ev == NNG_PIPE_EV_ADD_PRE)
		conn_source(p, source);
	pthread_mutex_lock(&f->conns_lock);
	if (ev == NNG_PIPE_EV_ADD_PRE) {
		unsigned at = f->nconns;
		if (f->nconns == f->max_pipes) {
			at = conn_victim(f, source);
			if (at < f->max_pipes)
				victim = f->closing[f->nclosing++] = f->conns[at].pipe;
			else
				refused = true;
		}
		if (!refused) {
			f->conns[at] = (struct conn){ .pipe = id, .seq = f->seq++, .since = bk_clock_monotonic_ms() };
			memcpy(f->conns[at].source, source, sizeof(source));
			f->nconns += at == f->nconns;
		}
	} else {
		for (unsigned i = 0; i < f->nconns; i++)
			if (f->conns[i].pipe == id) {
				f->conns[i] = f->conns[--f->nconns];
				break;
			}
		for (unsigned i = 0; i < f->nclosing; i++)
			if (f->closing[i] == id) {
				f->closing[i] = f->closing[--f->nclosing];
				break;
			}
	}
	pthread_mutex_unlock(&f->conns_lock);
	if (victim) {
		nng_pipe gone;
		gone.id = (uint32_t)victim;
		nng_pipe_close(gone);
	} else if (refused) {
		nng_pipe_close(p);
	}
	if (victim || refused)
		cap_report(f, victim != 0);
}

/* An ipc:// socket's directory (e.g. /run/boxkite) and its missing parents, as a packaged
 * daemon's runtime directory: root's, mode 0755 whatever the umask, so that clients can reach
 * the socket (itself 0600) and nobody else can put anything there. A directory that exists is
 * left as it is. (The front, no longer root when it stops, cannot remove its socket there: nng
 * removes a stale one at the next start.) */
static int ipc_dir_make(const char *url, bk_error **err)
{
	char dir[4096], failed[4096] = "";
	char *slash;
	int ret;

	if (strncmp(url, "ipc://", 6) != 0)
		return 0;
	if (snprintf(dir, sizeof(dir), "%s", url + 6) >= (int)sizeof(dir))
		return bk_error_set(err, BK_INVALID_ARGUMENT, ENAMETOOLONG, "--listen %s: path too long", url);
	slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return 0;
	*slash = '\0';
	ret = bk_mkdir_p(dir, 0755, 0755, true, failed, sizeof(failed));
	if (ret < 0)
		return bk_error_errno(err, -ret, "cannot create the directory %s for %s", failed[0] ? failed : dir, url);
	return 0;
}

int bk_front_make_dirs(const bk_config *cfg, bk_error **err)
{
	for (size_t i = 0; i < cfg->nlisten; i++) {
		int ret = ipc_dir_make(cfg->listen[i], err);
		if (ret < 0)
			return ret;
	}
	return 0;
}

int bk_front_listen(bk_server *srv, bk_error **err)
{
	struct front *f = calloc(1, sizeof(*f));
	int rv;

	if (!f)
		return bk_error_errno(err, ENOMEM, "front");
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->idle, NULL);
	pthread_mutex_init(&f->conns_lock, NULL);
	srv->front = f;
	f->max_pipes = srv->cfg.max_connections;
	if (!(f->conns = calloc(f->max_pipes, sizeof(*f->conns))) || !(f->order = calloc(f->max_pipes, sizeof(*f->order))))
		return bk_error_errno(err, ENOMEM, "front");
	rv = nng_rep0_open(&f->sock);
	if (rv)
		return bk_error_set(err, BK_INTERNAL, EIO, "nng_rep0_open: %s", nng_strerror(rv));
	/* nng drops (and for stream transports disconnects) anything larger: the first bound. */
	if ((rv = nng_socket_set_size(f->sock, NNG_OPT_RECVMAXSZ, srv->cfg.max_message)) ||
	    (rv = nng_pipe_notify(f->sock, NNG_PIPE_EV_ADD_PRE, pipe_event, f)) ||
	    (rv = nng_pipe_notify(f->sock, NNG_PIPE_EV_REM_POST, pipe_event, f)))
		return bk_error_set(err, BK_INTERNAL, EIO, "nng socket options: %s", nng_strerror(rv));

	f->nslots = srv->cfg.contexts;
	f->slots = calloc(f->nslots, sizeof(*f->slots));
	if (!f->slots)
		return bk_error_errno(err, ENOMEM, "front");
	for (unsigned i = 0; i < f->nslots; i++)
		if ((rv = slot_open(srv, f, &f->slots[i])))
			return bk_error_set(err, BK_INTERNAL, EIO, "nng context: %s", nng_strerror(rv));
	for (size_t i = 0; i < srv->cfg.nlisten; i++) {
		nng_listener l;
		rv = bk_tls_listen(f->sock, srv->cfg.listen[i], srv->tls, &l);
		if (rv)
			return bk_error_set(err, BK_UNAVAILABLE, rv == NNG_EADDRINUSE ? EADDRINUSE : EIO,
					    "cannot listen on %s: %s", srv->cfg.listen[i], nng_strerror(rv));
		f->listeners[f->nlisteners].id = nng_listener_id(l);
		f->listeners[f->nlisteners++].private = bk_url_private(srv->cfg.listen[i]);
	}
	return 0;
}

void bk_front_serve(bk_server *srv)
{
	struct front *f = srv->front;

	for (unsigned i = 0; i < f->nslots; i++)
		slot_recv(&f->slots[i]);
}

bool bk_front_stop(bk_server *srv)
{
	struct front *f = srv->front;

	if (!f)
		return true;
	/* No new requests; then wait for every call a handler still holds to end (its answer
	 * fails to send on the closed socket), so no slot is freed under a call. */
	if (bk_nng_close(f->sock, BK_FRONT_CLOSE_MS) < 0) {
		bk_log(BK_LOG_ERROR, "nng_close did not return within %d ms (libnng 1.5.2's close race): exiting "
				     "without waiting for it",
		       BK_FRONT_CLOSE_MS);
		return false;
	}
	pthread_mutex_lock(&f->lock);
	while (f->in_calls)
		pthread_cond_wait(&f->idle, &f->lock);
	pthread_mutex_unlock(&f->lock);
	for (unsigned i = 0; f->slots && i < f->nslots; i++)
		if (f->slots[i].aio)
			nng_aio_stop(f->slots[i].aio);
	for (struct slot *s = f->extras; s; s = s->next_extra)
		nng_aio_stop(s->aio);
	for (unsigned i = 0; f->slots && i < f->nslots; i++) {
		if (f->slots[i].aio)
			nng_aio_free(f->slots[i].aio);
	}
	while (f->extras) {
		struct slot *next = f->extras->next_extra;
		nng_aio_free(f->extras->aio);
		free(f->extras);
		f->extras = next;
	}
	free(f->slots);
	free(f->conns);
	free(f->order);
	pthread_mutex_destroy(&f->conns_lock);
	pthread_mutex_destroy(&f->lock);
	pthread_cond_destroy(&f->idle);
	free(f);
	srv->front = NULL;
	return true;
}
