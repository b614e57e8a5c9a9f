#include "boundary/link.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "channel.h"
#include "log.h"

typedef Boxkite__Executor__Order__KindCase order_kind;
typedef Boxkite__Executor__Reply__KindCase reply_kind;

/* --- the reply decoders: one row per order kind ---------------------------------------------- */

static bool done_has_info(const bk_reply *r)
{
	return r->done->info != NULL;
}

static const struct reply_row {
	order_kind order;
	reply_kind reply;       /* what a successful answer is */
	size_t nfds;            /* the descriptors that come with it */
	bool (*whole)(const bk_reply *r); /* more than its kind, where a field must be there */
} reply_rows[] = {
	{ BOXKITE__EXECUTOR__ORDER__KIND_CONFIGURE, BOXKITE__EXECUTOR__REPLY__KIND_PONG, 0, NULL },
	{ BOXKITE__EXECUTOR__ORDER__KIND_PING, BOXKITE__EXECUTOR__REPLY__KIND_PONG, 0, NULL },
	{ BOXKITE__EXECUTOR__ORDER__KIND_SPAWN, BOXKITE__EXECUTOR__REPLY__KIND_SPAWNED, 3, NULL },
	{ BOXKITE__EXECUTOR__ORDER__KIND_KILL, BOXKITE__EXECUTOR__REPLY__KIND_KILLED, 0, NULL },
	{ BOXKITE__EXECUTOR__ORDER__KIND_OPEN_KEY_FILE, BOXKITE__EXECUTOR__REPLY__KIND_OPENED, 1, NULL },
	{ BOXKITE__EXECUTOR__ORDER__KIND_CONNECT, BOXKITE__EXECUTOR__REPLY__KIND_OPENED, 1, NULL },
	{ BOXKITE__EXECUTOR__ORDER__KIND_STAT, BOXKITE__EXECUTOR__REPLY__KIND_DONE, 0, done_has_info },
	{ BOXKITE__EXECUTOR__ORDER__KIND_LIST, BOXKITE__EXECUTOR__REPLY__KIND_LISTED, 0, NULL },
	{ BOXKITE__EXECUTOR__ORDER__KIND_OPEN_READ, BOXKITE__EXECUTOR__REPLY__KIND_OPENED, 1, NULL },
	{ BOXKITE__EXECUTOR__ORDER__KIND_CREATE_TEMP, BOXKITE__EXECUTOR__REPLY__KIND_OPENED, 1, NULL },
	{ BOXKITE__EXECUTOR__ORDER__KIND_COMMIT, BOXKITE__EXECUTOR__REPLY__KIND_DONE, 0, NULL },
	{ BOXKITE__EXECUTOR__ORDER__KIND_MKDIR, BOXKITE__EXECUTOR__REPLY__KIND_DONE, 0, NULL },
	{ BOXKITE__EXECUTOR__ORDER__KIND_SYMLINK, BOXKITE__EXECUTOR__REPLY__KIND_DONE, 0, NULL },
	{ BOXKITE__EXECUTOR__ORDER__KIND_REMOVE, BOXKITE__EXECUTOR__REPLY__KIND_DONE, 0, NULL },
	{ BOXKITE__EXECUTOR__ORDER__KIND_RENAME, BOXKITE__EXECUTOR__REPLY__KIND_DONE, 0, NULL },
	{ BOXKITE__EXECUTOR__ORDER__KIND_USAGE, BOXKITE__EXECUTOR__REPLY__KIND_DONE, 0, NULL },
	{ BOXKITE__EXECUTOR__ORDER__KIND_WATCH, BOXKITE__EXECUTOR__REPLY__KIND_DONE, 0, NULL },
	{ BOXKITE__EXECUTOR__ORDER__KIND_UNWATCH, BOXKITE__EXECUTOR__REPLY__KIND_DONE, 0, NULL },
	{ BOXKITE__EXECUTOR__ORDER__KIND_KILL_ALL, BOXKITE__EXECUTOR__REPLY__KIND_DONE, 0, NULL },
	{ BOXKITE__EXECUTOR__ORDER__KIND_WIPE, BOXKITE__EXECUTOR__REPLY__KIND_DONE, 0, NULL },
};

static const struct reply_row *reply_row(order_kind kind)
{
	for (size_t i = 0; i < BK_ARRAY_SIZE(reply_rows); i++)
		if (reply_rows[i].order == kind)
			return &reply_rows[i];
	return NULL;
}

/* Every kind of the Order oneof has a row: a new order cannot be sent without saying what
 * answers it. */
static int reply_rows_check(bk_error **err)
{
	const ProtobufCMessageDescriptor *d = &boxkite__executor__order__descriptor;

	for (unsigned i = 0; i < d->n_fields; i++)
		if ((d->fields[i].flags & PROTOBUF_C_FIELD_FLAG_ONEOF) && !reply_row((order_kind)d->fields[i].id))
			return bk_error_set(err, BK_INTERNAL, EINVAL, "order %s has no row in the reply decoders",
					    d->fields[i].name);
	return 0;
}

/* 0 when reply is what row expects with nfds descriptors; else the order's error. */
static int reply_check(const struct reply_row *row, const bk_reply *reply, size_t nfds)
{
	if (reply->errnum)
		return reply->errnum > 0 ? reply->errnum : EPROTO;
	if (reply->kind_case != row->reply || nfds != row->nfds || (row->whole && !row->whole(reply)))
		return EPROTO;
	return 0;
}

/* --- the link -------------------------------------------------------------------------------- */

#define PENDING_BUCKETS 256
#define RECV_BATCH 32

/* A channel and the senders using it: freed when the last one is done. */
struct chan {
	struct chan *next;   /* in bk_link.retired */
	atomic_int refs;
	uint32_t armed;      /* the events it is registered for (link thread) */
	bk_channel ch;
};

struct pending {
	struct pending *next;
	uint64_t id;
	uint64_t exec_id;    /* a Spawn's: killed if its answer's descriptors are lost */
	struct chan *chan;   /* the channel it went out on: its answer comes on no other */
	const struct reply_row *row;
	bk_reply_fn cb;
	void *arg;
};

struct bk_link {
	const char *name;
	char gone[64], absent[96]; /* bk_link_why() for EPIPE and EAGAIN */
	bk_event_fn on_event;
	void *event_arg;
	pthread_t thread;
	bool started;
	int epfd, wake_fd;

	pthread_mutex_t lock;    /* everything below */
	struct chan *cur;        /* NULL: no peer */
	struct chan *retired;    /* replaced by bk_link_attach(), for the link's thread to close */
	bool closed;
	uint64_t next_id;
	struct pending *pending[PENDING_BUCKETS];
};

static void chan_put(struct chan *c)
{
	if (c && atomic_fetch_sub(&c->refs, 1) == 1) {
		bk_channel_fini(&c->ch);
		free(c);
	}
}

static void wake(bk_link *link)
{
	uint64_t one = 1;

	if (write(link->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		bk_log(BK_LOG_ERROR, "%s link: cannot wake its thread: %s", link->name, strerror(errno));
}

/* Called with the lock held. */
static struct pending *pending_take_locked(bk_link *link, uint64_t id)
{
	for (struct pending **pp = &link->pending[id % PENDING_BUCKETS]; *pp; pp = &(*pp)->next) {
		if ((*pp)->id == id) {
			struct pending *p = *pp;
			*pp = p->next;
			return p;
		}
	}
	return NULL;
}

static struct pending *pending_take(bk_link *link, uint64_t id)
{
	struct pending *p;

	pthread_mutex_lock(&link->lock);
	p = pending_take_locked(link, id);
	pthread_mutex_unlock(&link->lock);
	return p;
}

const char *bk_link_why(const bk_link *link, int err, const bk_reply *reply)
{
	if (reply && reply->errnum && reply->message[0])
		return reply->message;
	switch (err) {
	case EPIPE:
		return link->gone;
	case EAGAIN:
		return link->absent;
	case ENOBUFS:
		return "too many orders are waiting to be sent: retry";
	case EPROTO:
		return "an answer of the wrong kind";
	default:
		return strerror(err);
	}
}

int bk_link_new(const char *name, bk_event_fn on_event, void *arg, bk_link **out, bk_error **err)
{
	bk_link *link;
	int ret = reply_rows_check(err);

	if (ret < 0)
		return ret;
	link = calloc(1, sizeof(*link));
	if (!link)
		return bk_error_errno(err, ENOMEM, "%s link", name);
	link->name = name;
	snprintf(link->gone, sizeof(link->gone), "the %s went away", name);
	snprintf(link->absent, sizeof(link->absent), "no %s is there (the sandbox is not ready)", name);
	link->on_event = on_event;
	link->event_arg = arg;
	link->next_id = 1;
	pthread_mutex_init(&link->lock, NULL);
	link->epfd = epoll_create1(EPOLL_CLOEXEC);
	link->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (link->epfd < 0 || link->wake_fd < 0 ||
	    epoll_ctl(link->epfd, EPOLL_CTL_ADD, link->wake_fd, &(struct epoll_event){ .events = EPOLLIN }) < 0) {
		ret = bk_error_errno(err, errno, "%s link", name);
		bk_link_free(link);
		return ret;
	}
	*out = link;
	return 0;
}

/* Fail every order still waiting for an answer on c: its peer is gone. */
static void fail_pending(bk_link *link, struct chan *c)
{
	struct pending *failed = NULL;

	pthread_mutex_lock(&link->lock);
	for (size_t b = 0; b < PENDING_BUCKETS; b++) {
		for (struct pending **pp = &link->pending[b]; *pp;) {
			struct pending *p = *pp;
			if (p->chan != c) {
				pp = &p->next;
				continue;
			}
			*pp = p->next;
			p->next = failed;
			failed = p;
		}
	}
	pthread_mutex_unlock(&link->lock);
	while (failed) {
		struct pending *next = failed->next;
		failed->cb(failed->arg, EPIPE, NULL, NULL, 0);
		free(failed);
		failed = next;
	}
}

/* The end of a channel no longer in use (the link's thread, or before it runs): what was sent
 * on it fails, a sender still holding it finds it shut. */
static void chan_close(bk_link *link, struct chan *c)
{
	epoll_ctl(link->epfd, EPOLL_CTL_DEL, c->ch.fd, NULL);
	shutdown(c->ch.fd, SHUT_RDWR);
	fail_pending(link, c);
	chan_put(c);
	if (link->on_event)
		link->on_event(link->event_arg, NULL, NULL, 0);
}

/* The current channel ended (the link's thread). One replaced meanwhile is on the retired
 * list: closed there, once. */
static void detach(bk_link *link, struct chan *c)
{
	bool current;

	pthread_mutex_lock(&link->lock);
	current = link->cur == c;
	if (current)
		link->cur = NULL;
	pthread_mutex_unlock(&link->lock);
	if (current)
		chan_close(link, c);
}

/* Close the channels replaced meanwhile (the link's thread). */
static void close_retired(bk_link *link)
{
	struct chan *c;

	pthread_mutex_lock(&link->lock);
	c = link->retired;
	link->retired = NULL;
	pthread_mutex_unlock(&link->lock);
	while (c) {
		struct chan *next = c->next;
		chan_close(link, c);
		c = next;
	}
}

void bk_link_attach(bk_link *link, int fd)
{
	struct chan *c = calloc(1, sizeof(*c)), *old;

	if (!c || bk_channel_init(&c->ch, fd, BK_LINK_QUEUE_LIMIT) < 0) {
		if (!c)
			bk_close(fd);
		free(c);
		bk_log(BK_LOG_ERROR, "%s link: out of memory for its channel", link->name);
		return;
	}
	atomic_init(&c->refs, 1);
	c->armed = EPOLLIN;
	if (epoll_ctl(link->epfd, EPOLL_CTL_ADD, fd, &(struct epoll_event){ .events = EPOLLIN, .data.ptr = c }) < 0) {
		bk_log(BK_LOG_ERROR, "%s link: epoll_ctl: %s", link->name, strerror(errno));
		chan_put(c);
		return;
	}
	/* In use from here on, by senders at once; the one it replaces is closed by the link's
	 * thread, which may be reading it now. */
	pthread_mutex_lock(&link->lock);
	old = link->cur;
	link->cur = c;
	if (old) {
		old->next = link->retired;
		link->retired = old;
	}
	pthread_mutex_unlock(&link->lock);
	if (!old)
		return;
	if (link->started)
		wake(link);
	else
		close_retired(link);
}

static void kill_sent(void *arg, int err, bk_reply *reply, int *fds, size_t nfds)
{
	(void)arg;
	(void)err;
	(void)fds;
	(void)nfds;
	bk_reply_free(reply);
}

/* A reply whose descriptors did not arrive (the front was out of descriptors): the order fails
 * EMFILE, and the link goes on — a shortage of descriptors is not a broken peer. A command that
 * was started with them is killed: nobody could read it or end it otherwise. */
static void lost_descriptors(bk_link *link, bk_reply *reply)
{
	struct pending *p = reply->id ? pending_take(link, reply->id) : NULL;

	bk_log(BK_LOG_ERROR, "%s link: the descriptors of %s %llu did not arrive (out of descriptors)", link->name,
	       reply->id ? "the answer to order" : "an event of kind", reply->id ? (unsigned long long)reply->id
										: (unsigned long long)reply->kind_case);
	bk_reply_free(reply);
	if (!p)
		return;
	if (p->exec_id) {
		Boxkite__Executor__Kill kill = BOXKITE__EXECUTOR__KILL__INIT;
		bk_order order = BOXKITE__EXECUTOR__ORDER__INIT;
		kill.exec_id = p->exec_id;
		kill.signal = SIGKILL;
		order.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_KILL;
		order.kill = &kill;
		bk_link_send(link, &order, NULL, 0, BK_LINK_URGENT, kill_sent, NULL);
	}
	p->cb(p->arg, EMFILE, NULL, NULL, 0);
	free(p);
}

/* A packet from the peer: an event, or the reply to a pending order. */
static void dispatch(bk_link *link, bk_reply *reply, int *fds, size_t nfds)
{
	struct pending *p;
	int err;

	if (reply->id == 0) {
		if (link->on_event) {
			link->on_event(link->event_arg, reply, fds, nfds);
			return;
		}
		bk_log(BK_LOG_ERROR, "%s link: an event, and nobody to take it", link->name);
	} else if ((p = pending_take(link, reply->id))) {
		err = reply_check(p->row, reply, nfds);
		if (err)
			for (size_t i = 0; i < nfds; i++)
				close(fds[i]);
		if (err == EPROTO) {
			bk_log(BK_LOG_ERROR, "%s link: order %llu was answered with a reply of kind %d and %zu descriptors",
			       link->name, (unsigned long long)reply->id, (int)reply->kind_case, nfds);
			bk_reply_free(reply);
			reply = NULL;
		}
		p->cb(p->arg, err, reply, err ? NULL : fds, err ? 0 : nfds);
		free(p);
		return;
	} else {
		bk_log(BK_LOG_ERROR, "%s link: a reply to no pending order (%llu)", link->name,
		       (unsigned long long)reply->id);
	}
	for (size_t i = 0; i < nfds; i++)
		close(fds[i]);
	bk_reply_free(reply);
}

/* Receive what is waiting (a batch: the queue gets its turn too). false when the channel ended. */
static bool receive(bk_link *link, struct chan *c)
{
	for (int i = 0; i < RECV_BATCH; i++) {
		int fds[BK_CHANNEL_MAX_FDS];
		size_t nfds = 0;
		bool lost = false;
		bk_reply *reply = NULL;
		int ret = bk_channel_recv(&c->ch, &boxkite__executor__reply__descriptor, (ProtobufCMessage **)&reply, fds,
					  &nfds, &lost);

		if (ret == -EAGAIN)
			return true;
		if (ret < 0) {
			if (ret != -EPIPE)
				bk_log(BK_LOG_ERROR, "%s link: %s", link->name, strerror(-ret));
			return false;
		}
		if (lost)
			lost_descriptors(link, reply);
		else
			dispatch(link, reply, fds, nfds);
	}
	return true;
}

/* Register the channel for what it needs now: input always, output while packets wait. */
static void arm(bk_link *link, struct chan *c)
{
	uint32_t want = EPOLLIN | (bk_channel_queued(&c->ch) ? EPOLLOUT : 0);

	if (want == c->armed)
		return;
	if (epoll_ctl(link->epfd, EPOLL_CTL_MOD, c->ch.fd, &(struct epoll_event){ .events = want, .data.ptr = c }) < 0)
		bk_log(BK_LOG_ERROR, "%s link: epoll_ctl: %s", link->name, strerror(errno));
	else
		c->armed = want;
}

static struct chan *current(bk_link *link)
{
	struct chan *c;

	pthread_mutex_lock(&link->lock);
	c = link->cur;
	pthread_mutex_unlock(&link->lock);
	return c;
}

static void *link_main(void *arg)
{
	bk_link *link = arg;
	struct chan *c;
	bool closed = false;

	while (!closed) {
		struct epoll_event evs[4];
		int n = epoll_wait(link->epfd, evs, 4, -1);

		if (n < 0 && errno != EINTR) {
			bk_log(BK_LOG_ERROR, "%s link: epoll_wait: %s", link->name, strerror(errno));
			break;
		}
		for (int i = 0; i < n; i++) {
			if (!evs[i].data.ptr) {
				uint64_t count;
				if (read(link->wake_fd, &count, sizeof(count)) < 0 && errno != EAGAIN)
					bk_log(BK_LOG_ERROR, "%s link: wake-up read: %s", link->name, strerror(errno));
				continue;
			}
			/* Only the current channel is served; a replaced one is closed below. Channels
			 * are closed by this thread only, so c stays valid here. */
			c = current(link);
			if (evs[i].data.ptr != c)
				continue;
			if (((evs[i].events & EPOLLOUT) && bk_channel_flush(&c->ch) < 0) ||
			    ((evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !receive(link, c)))
				detach(link, c);
		}
		close_retired(link);
		pthread_mutex_lock(&link->lock);
		closed = link->closed;
		pthread_mutex_unlock(&link->lock);
		if ((c = current(link)))
			arm(link, c);
	}
	if ((c = current(link)))
		detach(link, c);
	close_retired(link);
	return NULL;
}

int bk_link_start(bk_link *link, bk_error **err)
{
	int rv = pthread_create(&link->thread, NULL, link_main, link);

	if (rv)
		return bk_error_errno(err, rv, "cannot start the %s link's thread", link->name);
	link->started = true;
	return 0;
}

void bk_link_send(bk_link *link, bk_order *order, const int *fds, size_t nfds, int flags, bk_reply_fn cb,
		  void *arg)
{
	const struct reply_row *row = reply_row(order->kind_case);
	struct pending *p = calloc(1, sizeof(*p));
	struct chan *c = NULL;
	int ret = ENOMEM;

	if (!row) {
		ret = EINVAL;
		goto fail;
	}
	if (!p)
		goto fail;
	p->row = row;
	p->cb = cb;
	p->arg = arg;
	p->exec_id = order->kind_case == BOXKITE__EXECUTOR__ORDER__KIND_SPAWN ? order->spawn->exec_id : 0;
	/* Registered before it is sent: the reply may come before bk_channel_send() returns. */
	pthread_mutex_lock(&link->lock);
	ret = link->closed ? EPIPE : EAGAIN;
	c = link->closed ? NULL : link->cur;
	if (c) {
		atomic_fetch_add(&c->refs, 1);
		p->chan = c;
		p->id = order->id = link->next_id++;
		p->next = link->pending[p->id % PENDING_BUCKETS];
		link->pending[p->id % PENDING_BUCKETS] = p;
	}
	pthread_mutex_unlock(&link->lock);
	if (!c)
		goto fail;
	ret = bk_channel_send(&c->ch, &order->base, fds, nfds, flags & BK_LINK_URGENT ? BK_CHANNEL_FORCE : 0);
	chan_put(c);
	if (ret >= 0) {
		/* Queued: the link's thread sends it once the socket takes more. */
		if (ret == 1)
			wake(link);
		return;
	}
	ret = -ret;
	/* Not sent. If the link's thread, seeing the peer gone meanwhile, has failed it already, its
	 * callback has run: it must not run twice. */
	if (!(p = pending_take(link, order->id)))
		return;
	if (ret != ENOBUFS && ret != EPIPE)
		bk_log(BK_LOG_ERROR, "cannot send an order to the %s: %s", link->name, strerror(ret));
fail:
	free(p);
	cb(arg, ret, NULL, NULL, 0);
}

struct sync_call {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
	int err;
	bk_reply *reply;
	int *fds;
	size_t nfds, maxfds;
};

static void sync_done(void *arg, int err, bk_reply *reply, int *fds, size_t nfds)
{
	struct sync_call *sc = arg;

	pthread_mutex_lock(&sc->lock);
	for (size_t i = 0; i < nfds; i++) {
		if (i < sc->maxfds)
			sc->fds[i] = fds[i];
		else
			close(fds[i]);
	}
	sc->nfds = nfds < sc->maxfds ? nfds : sc->maxfds;
	sc->err = err;
	sc->reply = reply;
	sc->done = true;
	pthread_cond_signal(&sc->cond);
	pthread_mutex_unlock(&sc->lock);
}

int bk_link_call(bk_link *link, bk_order *order, bk_reply **reply, int *fds, size_t *nfds, bk_error **err)
{
	return bk_link_call_with(link, order, NULL, 0, reply, fds, nfds, err);
}

int bk_link_call_with(bk_link *link, bk_order *order, const int *send, size_t nsend, bk_reply **reply, int *fds,
		      size_t *nfds, bk_error **err)
{
	struct sync_call sc = {
		.lock = PTHREAD_MUTEX_INITIALIZER,
		.cond = PTHREAD_COND_INITIALIZER,
		.fds = fds,
		.maxfds = nfds ? *nfds : 0,
	};
	int ret = 0;

	bk_link_send(link, order, send, nsend, 0, sync_done, &sc);
	pthread_mutex_lock(&sc.lock);
	while (!sc.done)
		pthread_cond_wait(&sc.cond, &sc.lock);
	pthread_mutex_unlock(&sc.lock);
	if (nfds)
		*nfds = sc.nfds;
	if (sc.err) {
		ret = bk_error_set(err, sc.err == EPIPE || sc.err == EAGAIN ? BK_UNAVAILABLE : bk_status_from_errno(sc.err),
				   sc.err, "%s%s%s", sc.reply && sc.reply->step[0] ? sc.reply->step : "",
				   sc.reply && sc.reply->step[0] ? ": " : "", bk_link_why(link, sc.err, sc.reply));
		bk_reply_free(sc.reply);
		return ret;
	}
	*reply = sc.reply;
	return 0;
}

void bk_link_close(bk_link *link)
{
	struct chan *c;

	if (!link)
		return;
	pthread_mutex_lock(&link->lock);
	link->closed = true;
	pthread_mutex_unlock(&link->lock);
	if (link->started) {
		wake(link);
		pthread_join(link->thread, NULL);
		link->started = false;
	} else if ((c = current(link))) {
		detach(link, c);
	}
}

void bk_link_free(bk_link *link)
{
	if (!link)
		return;
	bk_link_close(link);
	bk_close(link->epfd);
	bk_close(link->wake_fd);
	pthread_mutex_destroy(&link->lock);
	free(link);
}
