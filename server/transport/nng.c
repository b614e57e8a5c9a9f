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

#include "log.h"
#include "mkdir.h"
#include "rpc/call.h"

#include <nng/protocol/reqrep0/rep.h>

enum slot_state { SLOT_RECV, SLOT_SEND };

struct slot {
	bk_server *srv;
	nng_ctx ctx;
	nng_aio *aio;
	enum slot_state state;
	bool parked;            /* its call waits: once answered, the slot is a spare */
	struct slot *next;      /* in front.spares, or (for every extra slot) front.extras */
	struct slot *next_extra;
	bk_call call;
};

struct front {
	nng_socket sock;
	atomic_uint pipes;      /* connections now, counted from the pipe callbacks */
	unsigned max_pipes;
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

/* The call's end: send the answer on the context it came from, or receive again. */
static void slot_call_done(bk_call *call, nng_msg *answer)
{
	struct slot *s = call->transport;
	struct front *f = s->srv->front;

	if (!answer) {
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
		memset(&s->call, 0, sizeof(s->call));
		s->call.done = slot_call_done;
		s->call.park = slot_park;
		s->call.transport = s;
		bk_server_dispatch(s->srv, &s->call, nng_aio_get_msg(s->aio));
		return;
	case SLOT_SEND:
		/* On a failed send (the peer went away) the message is still ours to free. */
		if (rv != 0)
			nng_msg_free(nng_aio_get_msg(s->aio));
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
	slot_recv(n);
	return true;
}

/* Before authentication there is nothing to tell one connection from another: what they can
 * hold is bounded by their number. Each may hold up to --max-message of a message not yet
 * received whole (nng allocates a message as its length arrives), so --max-connections x
 * --max-message is all the unauthenticated bytes the front holds, beside one message per
 * context being checked. A connection past the cap is closed before the socket sees it. */
static void pipe_event(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	struct front *f = arg;

	if (ev == NNG_PIPE_EV_ADD_PRE) {
		/* Counted even when refused: nng reports the removal of every pipe it announced. */
		if (atomic_fetch_add(&f->pipes, 1) >= f->max_pipes) {
			bk_log(BK_LOG_WARN, "%u connections already: one more refused", f->max_pipes);
			nng_pipe_close(p);
		}
	} else if (ev == NNG_PIPE_EV_REM_POST) {
		atomic_fetch_sub(&f->pipes, 1);
	}
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
	srv->front = f;
	rv = nng_rep0_open(&f->sock);
	if (rv)
		return bk_error_set(err, BK_INTERNAL, EIO, "nng_rep0_open: %s", nng_strerror(rv));
	/* nng drops (and for stream transports disconnects) anything larger: the first bound. */
	if ((rv = nng_socket_set_size(f->sock, NNG_OPT_RECVMAXSZ, srv->cfg.max_message)) ||
	    (rv = nng_pipe_notify(f->sock, NNG_PIPE_EV_ADD_PRE, pipe_event, f)) ||
	    (rv = nng_pipe_notify(f->sock, NNG_PIPE_EV_REM_POST, pipe_event, f)))
		return bk_error_set(err, BK_INTERNAL, EIO, "nng socket options: %s", nng_strerror(rv));
	f->max_pipes = srv->cfg.max_connections;

	f->nslots = srv->cfg.contexts;
	f->slots = calloc(f->nslots, sizeof(*f->slots));
	if (!f->slots)
		return bk_error_errno(err, ENOMEM, "front");
	for (unsigned i = 0; i < f->nslots; i++)
		if ((rv = slot_open(srv, f, &f->slots[i])))
			return bk_error_set(err, BK_INTERNAL, EIO, "nng context: %s", nng_strerror(rv));
	for (size_t i = 0; i < srv->cfg.nlisten; i++) {
		rv = bk_tls_listen(f->sock, srv->cfg.listen[i], srv->tls);
		if (rv)
			return bk_error_set(err, BK_UNAVAILABLE, rv == NNG_EADDRINUSE ? EADDRINUSE : EIO,
					    "cannot listen on %s: %s", srv->cfg.listen[i], nng_strerror(rv));
	}
	return 0;
}

void bk_front_serve(bk_server *srv)
{
	struct front *f = srv->front;

	for (unsigned i = 0; i < f->nslots; i++)
		slot_recv(&f->slots[i]);
}

void bk_front_stop(bk_server *srv)
{
	struct front *f = srv->front;

	if (!f)
		return;
	/* No new requests; then wait for every call a handler still holds to end (its answer
	 * fails to send on the closed socket), so no slot is freed under a call. */
	nng_close(f->sock);
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
	pthread_mutex_destroy(&f->lock);
	pthread_cond_destroy(&f->idle);
	free(f);
	srv->front = NULL;
}
