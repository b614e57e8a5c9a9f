#include "transport/proxy.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "auth/keystore.h"
#include "boundary/link.h"
#include "clock.h"
#include "fullio.h"
#include "log.h"
#include "preview.h"
#include "runs/process.h"
#include "transport/httpreq.h"

#define HEAD_MAX (16 * 1024)     /* a request line and headers larger than this: 431 */
#define HEAD_WAIT_MS 10000       /* for the request's head to arrive */
#define IDLE_MS (10 * 60 * 1000) /* a relay that moves nothing either way this long ends */
#define SEND_TIMEOUT_S 30        /* a peer that takes nothing this long ends its relay */
#define RELAY_BUF (64 * 1024)

struct relay;

struct bk_proxy {
	bk_server *srv;
	int lfd, stop_fd;
	pthread_t thread;
	bool thread_started;
	pthread_mutex_t lock;
	pthread_cond_t idle;     /* a relay ended */
	unsigned active;         /* relays running */
	struct relay *relays;    /* the same, listed: a Reset cuts them all */
};

struct relay {
	struct relay *next;      /* in bk_proxy.relays (lock) */
	struct bk_proxy *px;
	int client, upstream;    /* upstream set under the lock */
	bool cut;                /* a Reset shut its sockets down (lock) */
	char peer[64];
	char head[HEAD_MAX + 1];
	size_t head_len;         /* bytes received, the head and whatever followed it */
	size_t head_end;         /* the head's length, its blank line included */
	size_t held;             /* bytes of head past head_end held for an upgrade's tunnel */
};

static void respond(int fd, int code, const char *reason, const char *text)
{
	char buf[512];
	int n = snprintf(buf, sizeof(buf),
			 "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %zu\r\n"
			 "Cache-Control: no-store\r\nConnection: close\r\n\r\n%s",
			 code, reason, strlen(text), text);

	/* Best effort: a client that went away has no use for it. */
	if (n > 0)
		(void)send(fd, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1, MSG_NOSIGNAL);
}

/* Wait for fd to be readable (or the stop), up to ms. 1 readable, 0 timed out or stopping, -1 error. */
static int wait_readable(struct bk_proxy *px, int fd, int ms)
{
	struct pollfd p[2] = { { .fd = fd, .events = POLLIN }, { .fd = px->stop_fd, .events = POLLIN } };
	int n;

	do
		n = poll(p, 2, ms);
	while (n < 0 && errno == EINTR);
	if (n <= 0 || (p[1].revents & POLLIN))
		return n < 0 ? -1 : 0;
	return 1;
}

/* The request's head, up to its blank line. 0, or the status to refuse it with. */
static int read_head(struct relay *r)
{
	int64_t deadline = bk_clock_monotonic_ms() + HEAD_WAIT_MS;

	for (;;) {
		char *end = r->head_len >= 4 ? memmem(r->head, r->head_len, "\r\n\r\n", 4) : NULL;
		if (end) {
			r->head_end = (size_t)(end - r->head) + 4;
			return 0;
		}
		if (r->head_len == HEAD_MAX)
			return 431;
		int64_t left = deadline - bk_clock_monotonic_ms();
		if (left <= 0 || wait_readable(r->px, r->client, (int)left) <= 0)
			return 408;
		ssize_t n = recv(r->client, r->head + r->head_len, HEAD_MAX - r->head_len, 0);
		if (n <= 0)
			return 400;
		r->head_len += (size_t)n;
	}
}

/* The executor's connection to 127.0.0.1:port in the sandbox's network namespace, or -errno. */
static int connect_upstream(bk_server *srv, unsigned port)
{
	Boxkite__Executor__Connect connect = BOXKITE__EXECUTOR__CONNECT__INIT;
	bk_order order = BOXKITE__EXECUTOR__ORDER__INIT;
	bk_reply *reply = NULL;
	bk_error *err = NULL;
	int fd = -1;
	size_t nfds = 1;

	connect.port = port;
	order.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_CONNECT;
	order.connect = &connect;
	if (bk_link_call(srv->executor, &order, &reply, &fd, &nfds, &err) < 0) {
		int errnum = err ? err->errnum : 0;
		bk_error_free(err);
		return errnum ? -errnum : -EIO;
	}
	bk_reply_free(reply);
	return nfds == 1 ? fd : -EPROTO;
}

/* Write n bytes of buf to fd; false when it cannot take them. */
static bool forward(int fd, const char *buf, size_t n)
{
	return n == 0 || bk_write_full(fd, (const uint8_t *)buf, n) == 0;
}

/* After the request's head went to the sandbox: its body (and nothing after it), then the answer
 * back until the sandbox closes — an upgrade answered 101 becomes a tunnel both ways until both
 * sides have closed theirs. Anything more the client sends on the connection is not forwarded: its
 * next request comes on a connection of its own, with its token checked. The relay ends at the
 * token's expiry (expires_ms, CLOCK_MONOTONIC), after IDLE_MS without a byte forwarded, at the
 * stop, or when a Reset shuts its sockets. Returns how it ended. */
static const char *relay_bytes(struct relay *r, bk_httpreq *rq, int64_t expires_ms, uint64_t moved[2])
{
	int fds[2] = { r->client, r->upstream };
	bool open[2] = { true, true }, body_done = false, tunnel = false, decided = !rq->upgrade;
	char buf[RELAY_BUF], first[13];
	size_t nfirst = 0;
	int64_t active_ms = bk_clock_monotonic_ms();
	ssize_t n;

	/* What came with the head: the body's start, and after it (an upgrade's) the tunnel's. */
	n = bk_httpreq_body(rq, r->head + r->head_end, r->head_len - r->head_end, &body_done);
	if (n < 0 || !forward(r->upstream, r->head + r->head_end, (size_t)n))
		return n < 0 ? "failed: a malformed chunked body" : "failed: the request did not go through";
	moved[0] += (uint64_t)n;
	if (body_done && rq->upgrade)
		r->held = r->head_len - r->head_end - (size_t)n;
	while (open[1] || (tunnel && open[0])) {
		int64_t now = bk_clock_monotonic_ms();
		int64_t deadline = active_ms + IDLE_MS < expires_ms ? active_ms + IDLE_MS : expires_ms;
		/* The client is read for the body, in a tunnel, and once the answer is coming (to notice
		 * it going away; its bytes dropped); not while an upgrade waits for its answer. */
		bool read_client = open[0] && (!body_done || tunnel || decided);
		struct pollfd p[3] = { { .fd = open[0] ? fds[0] : -1, .events = read_client ? POLLIN : 0 },
				       { .fd = open[1] ? fds[1] : -1, .events = POLLIN },
				       { .fd = r->px->stop_fd, .events = POLLIN } };
		if (deadline <= now)
			return deadline == expires_ms ? "ended: its token expired" : "ended: idle";
		int ready = poll(p, 3, (int)(deadline - now));
		if (ready < 0 && errno == EINTR)
			continue;
		if (ready < 0 || (p[2].revents & POLLIN))
			return "ended: boxkited stops";
		if (ready == 0)
			continue;
		if (open[1] && (p[1].revents & (POLLIN | POLLHUP | POLLERR))) {
			n = recv(fds[1], buf, sizeof(buf), 0);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				open[1] = false;
				if (!tunnel)
					return "relayed";
				shutdown(fds[0], SHUT_WR);
				continue;
			}
			if (!decided) {
				size_t take = (size_t)n < sizeof(first) - nfirst ? (size_t)n : sizeof(first) - nfirst;
				memcpy(first + nfirst, buf, take);
				nfirst += take;
			}
			if (!forward(fds[0], buf, (size_t)n))
				return "ended: the client takes nothing";
			moved[1] += (uint64_t)n;
			active_ms = bk_clock_monotonic_ms();
			if (!decided && bk_httpreq_switched(first, nfirst) >= 0) {
				decided = true;
				tunnel = bk_httpreq_switched(first, nfirst) == 1;
				/* What the client sent past the upgrade's head opens the tunnel. */
				if (tunnel && !forward(fds[1], r->head + r->head_len - r->held, r->held))
					return "failed: the tunnel did not open";
			}
		}
		if (open[0] && (p[0].revents & (POLLIN | POLLHUP | POLLERR))) {
			if (!read_client) {
				/* Gone before the upgrade was answered. */
				if (p[0].revents & (POLLHUP | POLLERR))
					return "ended: the client went away";
				continue;
			}
			n = recv(fds[0], buf, sizeof(buf), 0);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				open[0] = false;
				if (!body_done)
					return "ended: the client went away in its request";
				if (tunnel)
					shutdown(fds[1], SHUT_WR);
				continue;
			}
			size_t take = (size_t)n;
			if (!body_done) {
				ssize_t b = bk_httpreq_body(rq, buf, (size_t)n, &body_done);
				if (b < 0)
					return "failed: a malformed chunked body";
				take = (size_t)b;
			} else if (!tunnel) {
				continue; /* not this request's: dropped */
			}
			if (!forward(fds[1], buf, take))
				return "ended: the sandbox takes nothing";
			moved[0] += take;
			active_ms = bk_clock_monotonic_ms();
		}
	}
	return "relayed";
}

/* A relay slot given back (the stop and a Reset wait for them), r off the list when listed. */
static void relay_done(struct bk_proxy *px, struct relay *r)
{
	pthread_mutex_lock(&px->lock);
	for (struct relay **pp = &px->relays; r && *pp; pp = &(*pp)->next) {
		if (*pp == r) {
			*pp = r->next;
			break;
		}
	}
	px->active--;
	pthread_cond_broadcast(&px->idle);
	pthread_mutex_unlock(&px->lock);
}

/* The upstream connection, kept unless a Reset cut the relay meanwhile. */
static bool relay_attach(struct relay *r, int upstream)
{
	bool cut;

	pthread_mutex_lock(&r->px->lock);
	cut = r->cut;
	if (!cut)
		r->upstream = upstream;
	pthread_mutex_unlock(&r->px->lock);
	if (cut)
		close(upstream);
	return !cut;
}

static void *relay_main(void *arg)
{
	struct relay *r = arg;
	bk_server *srv = r->px->srv;
	struct timeval tv = { .tv_sec = SEND_TIMEOUT_S };
	struct timespec started;
	bk_httpreq rq = { 0 };
	char head[HEAD_MAX + 64];
	size_t head_len = 0;
	uint64_t moved[2] = { 0, 0 };
	const char *outcome = "relayed";
	int64_t expires_s = 0;
	int code, upstream;

	clock_gettime(CLOCK_MONOTONIC, &started);
	setsockopt(r->client, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	code = read_head(r);
	if (!code)
		code = bk_httpreq_parse(r->head, r->head_end, &rq, head, sizeof(head), &head_len);
	if (code) {
		respond(r->client, code, code == 431 ? "Request Header Fields Too Large" : code == 408 ? "Request Timeout"
					 : code == 501 ? "Not Implemented" : "Bad Request",
			"a preview is /preview/PORT/TOKEN/PATH (bkctl preview PORT prints one)\n");
		outcome = "refused: not a preview request";
		goto out;
	}
	bk_keyring_ref *keys = bk_keystore_get(srv->keystore);
	bk_preview_verdict v = bk_preview_token_check(keys ? bk_keyring_ref_ring(keys) : NULL, rq.token,
						      (uint16_t)rq.port, bk_clock_realtime_ms() / 1000,
						      srv->cfg.preview_ttl_max_ms / 1000, &expires_s);
	bk_keyring_ref_put(keys);
	if (v != BK_PREVIEW_OK) {
		char text[128];
		snprintf(text, sizeof(text), "preview token refused: %s\n", bk_preview_verdict_name(v));
		respond(r->client, 403, "Forbidden", text);
		outcome = bk_preview_verdict_name(v);
		goto out;
	}
	/* A Reset running (or failed) serves nothing of the sandbox: what exposes the port may be
	 * the last tenant's. */
	if (atomic_load(&srv->gate) != BK_GATE_OPEN) {
		respond(r->client, 503, "Service Unavailable", "the sandbox is being reset: retry\n");
		outcome = "refused: a reset";
		goto out;
	}
	if (!bk_processes_exposing(srv, rq.port)) {
		respond(r->client, 404, "Not Found", "no process exposes this port (bkctl start --expose PORT)\n");
		outcome = "refused: no process exposes the port";
		goto out;
	}
	upstream = connect_upstream(srv, rq.port);
	if (upstream < 0) {
		char text[160];
		snprintf(text, sizeof(text), "the process exposing port %u does not answer: %s\n", rq.port,
			 strerror(-upstream));
		respond(r->client, 502, "Bad Gateway", text);
		outcome = "refused: the port does not answer";
		goto out;
	}
	if (!relay_attach(r, upstream)) {
		outcome = "ended: a reset";
		goto out;
	}
	setsockopt(r->upstream, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (!forward(r->upstream, head, head_len)) {
		outcome = "failed: the request did not go through";
		goto out;
	}
	/* The token's expiry, on the clock the relay keeps its deadlines by. */
	outcome = relay_bytes(r, &rq, bk_clock_monotonic_ms() + (expires_s * 1000 - bk_clock_realtime_ms()), moved);
out:
	pthread_mutex_lock(&r->px->lock);
	if (r->cut)
		outcome = "ended: a reset";
	pthread_mutex_unlock(&r->px->lock);
	bk_log(BK_LOG_INFO, "preview from %s: port %u, %s; %llu bytes in, %llu out, %llu us", r->peer,
	       rq.port, outcome, (unsigned long long)moved[0], (unsigned long long)moved[1],
	       (unsigned long long)bk_elapsed_us(&started));
	close(r->client);
	if (r->upstream >= 0)
		close(r->upstream);
	relay_done(r->px, r);
	free(r);
	return NULL;
}

static void *accept_main(void *arg)
{
	struct bk_proxy *px = arg;

	for (;;) {
		struct sockaddr_storage from;
		socklen_t from_len = sizeof(from);
		struct relay *r;
		pthread_t t;
		int fd, w = wait_readable(px, px->lfd, -1);

		if (w == 0)
			return NULL; /* stopping */
		if (w < 0)
			continue;
		fd = accept4(px->lfd, (struct sockaddr *)&from, &from_len, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		r = calloc(1, sizeof(*r));
		if (r) {
			r->px = px;
			r->client = fd;
			r->upstream = -1;
			if (getnameinfo((struct sockaddr *)&from, from_len, r->peer, sizeof(r->peer), NULL, 0,
					NI_NUMERICHOST))
				snprintf(r->peer, sizeof(r->peer), "?");
		}
		/* Listed from the start: a Reset cuts it wherever it is. */
		pthread_mutex_lock(&px->lock);
		bool room = r && px->active < BK_PROXY_MAX;
		if (room) {
			px->active++;
			r->next = px->relays;
			px->relays = r;
		}
		pthread_mutex_unlock(&px->lock);
		if (!room) {
			respond(fd, 503, "Service Unavailable", "too many previews at once: retry\n");
			close(fd);
			free(r);
			continue;
		}
		pthread_attr_t attr;
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		if (pthread_create(&t, &attr, relay_main, r) != 0) {
			respond(fd, 503, "Service Unavailable", "boxkited cannot take a preview now: retry\n");
			close(fd);
			relay_done(px, r);
			free(r);
		}
		pthread_attr_destroy(&attr);
	}
}

/* "http://HOST:PORT" (HOST a numeric address, [v6] in brackets) to a listening socket. */
static int listen_on(const char *url, bk_error **err)
{
	char host[256];
	const char *hp, *colon;
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE },
			*ai = NULL;
	int fd, one = 1, rv;

	if (strncmp(url, "http://", 7) != 0)
		return bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL, "--preview-listen %s: expected http://HOST:PORT", url);
	hp = url + 7;
	colon = strrchr(hp, ':');
	if (!colon || colon == hp || (size_t)(colon - hp) >= sizeof(host) || !colon[1])
		return bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL, "--preview-listen %s: expected http://HOST:PORT", url);
	if (hp[0] == '[' && colon[-1] == ']')
		snprintf(host, sizeof(host), "%.*s", (int)(colon - hp - 2), hp + 1);
	else
		snprintf(host, sizeof(host), "%.*s", (int)(colon - hp), hp);
	rv = getaddrinfo(host, colon + 1, &hints, &ai);
	if (rv)
		return bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL, "--preview-listen %s: %s (a numeric address)", url,
				    gai_strerror(rv));
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 64) < 0) {
		int errnum = errno;
		if (fd >= 0)
			close(fd);
		freeaddrinfo(ai);
		return bk_error_errno(err, errnum, "cannot listen on %s", url);
	}
	freeaddrinfo(ai);
	return fd;
}

int bk_proxy_start(bk_server *srv, bk_error **err)
{
	struct bk_proxy *px;
	int rv;

	if (!srv->cfg.preview_listen)
		return 0;
	px = calloc(1, sizeof(*px));
	if (!px)
		return bk_error_errno(err, ENOMEM, "preview listener");
	srv->proxy = px;
	px->srv = srv;
	px->stop_fd = px->lfd = -1;
	pthread_mutex_init(&px->lock, NULL);
	pthread_cond_init(&px->idle, NULL);
	px->lfd = listen_on(srv->cfg.preview_listen, err);
	if (px->lfd < 0)
		return px->lfd;
	px->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (px->stop_fd < 0)
		return bk_error_errno(err, errno, "preview listener");
	rv = pthread_create(&px->thread, NULL, accept_main, px);
	if (rv)
		return bk_error_errno(err, rv, "preview listener thread");
	px->thread_started = true;
	bk_log(BK_LOG_INFO, "previews on %s/preview/PORT/TOKEN/", srv->cfg.preview_listen);
	return 0;
}

void bk_proxy_stop(bk_server *srv)
{
	struct bk_proxy *px = srv->proxy;
	uint64_t one = 1;

	if (!px)
		return;
	if (px->stop_fd >= 0 && write(px->stop_fd, &one, sizeof(one)) < 0)
		bk_log(BK_LOG_ERROR, "preview listener: cannot stop: %s", strerror(errno));
	if (px->thread_started)
		pthread_join(px->thread, NULL);
	pthread_mutex_lock(&px->lock);
	while (px->active)
		pthread_cond_wait(&px->idle, &px->lock);
	pthread_mutex_unlock(&px->lock);
	if (px->lfd >= 0)
		close(px->lfd);
	if (px->stop_fd >= 0)
		close(px->stop_fd);
	pthread_mutex_destroy(&px->lock);
	pthread_cond_destroy(&px->idle);
	free(px);
	srv->proxy = NULL;
}

void bk_proxy_cut_all(bk_server *srv)
{
	struct bk_proxy *px = srv->proxy;
	bool cut;

	if (!px)
		return;
	pthread_mutex_lock(&px->lock);
	for (struct relay *r = px->relays; r; r = r->next) {
		r->cut = true;
		/* Both ends see the connection end at once; the relay's thread wakes and goes. */
		shutdown(r->client, SHUT_RDWR);
		if (r->upstream >= 0)
			shutdown(r->upstream, SHUT_RDWR);
	}
	do {
		cut = false;
		for (struct relay *r = px->relays; r; r = r->next)
			cut = cut || r->cut;
		if (cut)
			pthread_cond_wait(&px->idle, &px->lock);
	} while (cut);
	pthread_mutex_unlock(&px->lock);
}
