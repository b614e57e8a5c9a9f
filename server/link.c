#include "link.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "channel.h"
#include "executor.h"
#include "log.h"

struct pending {
	struct pending *next;
	uint64_t id;
	bk_reply_fn cb;
	void *arg;
};

struct bk_link {
	bk_channel ch;
	pid_t pid;
	pthread_t reader;
	bool reader_started;
	pthread_mutex_t lock; /* send order, pending list, next_id */
	struct pending *pending;
	uint64_t next_id;
	bool closed;
	bk_reply_fn event_cb;
	void *event_arg;
};

void bk_link_on_event(bk_link *link, bk_reply_fn cb, void *arg)
{
	link->event_cb = cb;
	link->event_arg = arg;
}

int bk_link_spawn(const bk_config *cfg, bk_link **out, bk_error **err)
{
	bk_link *link;
	int sv[2];
	pid_t front = getpid();

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return bk_error_errno(err, errno, "socketpair");
	/* A SEQPACKET packet can be no larger than its sender's send buffer (~208 KiB by default,
	 * net.core.wmem_max): make room for BK_CHANNEL_MAX_MSG both ways. FORCE needs CAP_NET_ADMIN,
	 * which we still hold; the kernel doubles the value for its bookkeeping. */
	for (int i = 0; i < 2; i++) {
		int size = (int)BK_CHANNEL_MAX_MSG + 65536;
		if (setsockopt(sv[i], SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof(size)) < 0) {
			int saved = errno;
			bk_close(sv[0]);
			bk_close(sv[1]);
			return bk_error_errno(err, saved, "size the executor channel's buffers");
		}
	}
	link = calloc(1, sizeof(*link));
	if (!link || bk_channel_init(&link->ch, sv[0]) < 0) {
		free(link);
		bk_close(sv[0]);
		bk_close(sv[1]);
		return bk_error_errno(err, ENOMEM, "executor link");
	}
	pthread_mutex_init(&link->lock, NULL);
	link->next_id = 1;
	link->pid = fork();
	if (link->pid < 0) {
		int saved = errno;
		bk_close(sv[1]);
		bk_link_free(link);
		return bk_error_errno(err, saved, "cannot fork the executor");
	}
	if (link->pid == 0) {
		bk_close(sv[0]);
		_exit(bk_executor_main(sv[1], cfg, front));
	}
	bk_close(sv[1]);
	*out = link;
	return 0;
}

static struct pending *take_pending(bk_link *link, uint64_t id)
{
	struct pending **pp, *p = NULL;

	pthread_mutex_lock(&link->lock);
	for (pp = &link->pending; *pp; pp = &(*pp)->next) {
		if ((*pp)->id == id) {
			p = *pp;
			*pp = p->next;
			break;
		}
	}
	pthread_mutex_unlock(&link->lock);
	return p;
}

static void fail_all_pending(bk_link *link)
{
	struct pending *p;

	pthread_mutex_lock(&link->lock);
	link->closed = true;
	p = link->pending;
	link->pending = NULL;
	pthread_mutex_unlock(&link->lock);
	while (p) {
		struct pending *next = p->next;
		p->cb(p->arg, NULL, NULL, 0);
		free(p);
		p = next;
	}
}

static void *reader_main(void *arg)
{
	bk_link *link = arg;

	for (;;) {
		int fds[BK_CHANNEL_MAX_FDS];
		size_t nfds = 0;
		bk_reply *reply = NULL;
		struct pending *p;
		int ret = bk_channel_recv(&link->ch, &boxkite__executor__reply__descriptor, (ProtobufCMessage **)&reply,
					  fds, &nfds);

		if (ret < 0) {
			if (ret != -EPIPE && ret != -EBADF)
				bk_log(BK_LOG_ERROR, "executor channel: %s", strerror(-ret));
			break;
		}
		if (reply->id == 0 && link->event_cb) {
			link->event_cb(link->event_arg, reply, fds, nfds);
			continue;
		}
		p = take_pending(link, reply->id);
		if (p) {
			p->cb(p->arg, reply, fds, nfds);
			free(p);
		} else {
			bk_log(BK_LOG_ERROR, "executor replied to unknown order %llu", (unsigned long long)reply->id);
			for (size_t i = 0; i < nfds; i++)
				close(fds[i]);
			bk_reply_free(reply);
		}
	}
	fail_all_pending(link);
	/* The channel is closed: tell the events' owner the executor is gone. */
	if (link->event_cb)
		link->event_cb(link->event_arg, NULL, NULL, 0);
	return NULL;
}

int bk_link_start(bk_link *link, bk_error **err)
{
	int rv = pthread_create(&link->reader, NULL, reader_main, link);

	if (rv)
		return bk_error_errno(err, rv, "cannot start the executor reader thread");
	link->reader_started = true;
	return 0;
}

void bk_link_send(bk_link *link, bk_order *order, const int *fds, size_t nfds, bk_reply_fn cb, void *arg)
{
	struct pending *p = calloc(1, sizeof(*p));
	bool registered = false;
	int ret = -ENOMEM;

	if (p) {
		p->cb = cb;
		p->arg = arg;
		pthread_mutex_lock(&link->lock);
		ret = -EPIPE;
		if (!link->closed) {
			p->id = order->id = link->next_id++;
			/* Register before sending: the reply may arrive before bk_channel_send() returns. */
			p->next = link->pending;
			link->pending = p;
			registered = true;
			ret = bk_channel_send(link->ch.fd, &order->base, fds, nfds);
		}
		pthread_mutex_unlock(&link->lock);
		if (ret == 0)
			return;
		/* Not sent. If the reader, seeing the executor gone meanwhile, already failed it, its
		 * callback has run: it must not run twice. */
		if (registered && !take_pending(link, order->id))
			return;
		free(p);
	}
	if (ret != -EPIPE)
		bk_log(BK_LOG_ERROR, "cannot send an order to the executor: %s", strerror(-ret));
	cb(arg, NULL, NULL, 0);
}

struct sync_call {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
	bk_reply *reply;
	int *fds;
	size_t nfds, maxfds;
};

static void sync_done(void *arg, bk_reply *reply, int *fds, size_t nfds)
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
	sc->reply = reply;
	sc->done = true;
	pthread_cond_signal(&sc->cond);
	pthread_mutex_unlock(&sc->lock);
}

int bk_link_call(bk_link *link, bk_order *order, bk_reply **reply, int *fds, size_t *nfds, bk_error **err)
{
	struct sync_call sc = {
		.lock = PTHREAD_MUTEX_INITIALIZER,
		.cond = PTHREAD_COND_INITIALIZER,
		.fds = fds,
		.maxfds = nfds ? *nfds : 0,
	};
	bk_link_send(link, order, NULL, 0, sync_done, &sc);
	pthread_mutex_lock(&sc.lock);
	while (!sc.done)
		pthread_cond_wait(&sc.cond, &sc.lock);
	pthread_mutex_unlock(&sc.lock);
	if (nfds)
		*nfds = sc.nfds;
	if (!sc.reply)
		return bk_error_set(err, BK_UNAVAILABLE, EPIPE, "the executor went away");
	*reply = sc.reply;
	return 0;
}

void bk_link_close(bk_link *link)
{
	if (!link || link->pid == 0) /* pid 0: closed already */
		return;
	/* Closing our end makes the executor's next receive see EOF; it cleans up and exits. */
	shutdown(link->ch.fd, SHUT_RDWR);
	if (link->reader_started)
		pthread_join(link->reader, NULL);
	else
		fail_all_pending(link);
	link->reader_started = false;
	if (link->pid > 0) {
		while (waitpid(link->pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	link->pid = 0;
}

void bk_link_free(bk_link *link)
{
	if (!link)
		return;
	bk_link_close(link);
	bk_channel_fini(&link->ch);
	pthread_mutex_destroy(&link->lock);
	free(link);
}
