#include "transport/proxy.h"

#include <errno.h>
#include <fcntl.h>
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
#include "transport/door.h"
#include "transport/httpreq.h"

#define RELAY_BUF (64 * 1024)

struct relay;

struct bk_proxy {
	bk_server *srv;
	bk_door *door;
	int stop_fd;             /* readable once the relays are to end */
	pthread_mutex_t lock;
	pthread_cond_t idle;     /* a relay ended */
	unsigned active;         /* relays running */
	struct relay *relays;    /* the same, listed: a Reset cuts them all */
};

/* A preview whose token checked: the connection, and its one request (httpreq.h), for its
 * thread. */
struct relay {
	struct relay *next;      /* in bk_proxy.relays (lock) */
	struct bk_proxy *px;
	int client, upstream;    /* upstream set under the lock */
	bool cut;                /* a Reset shut its sockets down (lock) */
	bk_httpreq rq;
	int64_t expires_s;       /* its token's expiry */
	char peer[64];
	char head[BK_DOOR_HEAD_MAX + 64]; /* the head to send: rewritten for the sandbox */
	size_t head_len;
	char rest[BK_DOOR_HEAD_MAX]; /* what came after the head: its body's start (an upgrade's tunnel's) */
	size_t rest_len;
	size_t held;             /* bytes at the end of rest held for an upgrade's tunnel */
	struct timespec started;
};

/* Wait for a connection begun on the non-blocking fd to be made, up to BK_PROXY_CONNECT_WAIT_MS (or the
 * stop): 0 with fd blocking again, or -errno (-ETIMEDOUT: a listener that does not accept). */
static int connect_wait(struct bk_proxy *px, int fd)
{
	struct pollfd p[2] = { { .fd = fd, .events = POLLOUT }, { .fd = px->stop_fd, .events = POLLIN } };
	int64_t deadline = bk_clock_monotonic_ms() + BK_PROXY_CONNECT_WAIT_MS;
	int64_t left;
	int n, err = 0;
	socklen_t len = sizeof(err);

	do {
		left = deadline - bk_clock_monotonic_ms();
		n = poll(p, 2, left > 0 ? (int)left : 0);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if (p[1].revents & POLLIN)
		return -ECANCELED;
	if (n == 0)
		return -ETIMEDOUT;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		return -errno;
	if (err)
		return -err;
	return fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0 ? -errno : 0;
}

/* The executor's connection to 127.0.0.1:port in the sandbox's network namespace, or -errno. */
static int connect_upstream(struct bk_proxy *px, unsigned port)
{
	bk_server *srv = px->srv;
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
	if (nfds != 1)
		return -EPROTO;
	int ret = connect_wait(px, fd);
	if (ret < 0) {
		close(fd);
		return ret;
	}
	return fd;
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
 * token's expiry (expires_ms, CLOCK_MONOTONIC), after BK_PROXY_IDLE_MS without a byte forwarded, at the
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
	n = bk_httpreq_body(rq, r->rest, r->rest_len, &body_done);
	if (n < 0 || !forward(r->upstream, r->rest, (size_t)n))
		return n < 0 ? "failed: a malformed chunked body" : "failed: the request did not go through";
	moved[0] += (uint64_t)n;
	if (body_done && rq->upgrade)
		r->held = r->rest_len - (size_t)n;
	while (open[1] || (tunnel && open[0])) {
		int64_t now = bk_clock_monotonic_ms();
		int64_t deadline = active_ms + BK_PROXY_IDLE_MS < expires_ms ? active_ms + BK_PROXY_IDLE_MS : expires_ms;
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
				if (tunnel && !forward(fds[1], r->rest + r->rest_len - r->held, r->held))
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

/* A relay slot given back (the stop and a Reset wait for them), r off the list. */
static void relay_done(struct bk_proxy *px, struct relay *r)
{
	pthread_mutex_lock(&px->lock);
	for (struct relay **pp = &px->relays; *pp; pp = &(*pp)->next) {
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
	struct timeval tv = { .tv_sec = BK_PROXY_SEND_TIMEOUT_S };
	uint64_t moved[2] = { 0, 0 };
	const char *outcome = "relayed";
	char *answer = NULL;
	size_t answer_len = 0;

	int upstream;

	setsockopt(r->client, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	upstream = connect_upstream(r->px, r->rq.port);
	if (upstream < 0) {
		char text[160];
		int n = snprintf(text, sizeof(text), "the process exposing port %u does not answer: %s\n", r->rq.port,
				 strerror(-upstream));
		if (bk_door_response(502, "Bad Gateway", "text/plain; charset=utf-8", text, (size_t)n, &answer,
				     &answer_len) == 0)
			(void)bk_write_full(r->client, (const uint8_t *)answer, answer_len);
		free(answer);
		outcome = "refused: the port does not answer";
		goto out;
	}
	if (!relay_attach(r, upstream)) {
		outcome = "ended: a reset";
		goto out;
	}
	setsockopt(r->upstream, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	/* The head rewritten (the preview's part of the path gone, Connection: close), then its body
	 * and the answer; the token's expiry on the clock the relay keeps its deadlines by. */
	if (!forward(r->upstream, r->head, r->head_len)) {
		outcome = "failed: the request did not go through";
		goto out;
	}
	outcome = relay_bytes(r, &r->rq, bk_clock_monotonic_ms() + (r->expires_s * 1000 - bk_clock_realtime_ms()),
			      moved);
out:
	pthread_mutex_lock(&r->px->lock);
	if (r->cut)
		outcome = "ended: a reset";
	pthread_mutex_unlock(&r->px->lock);
	bk_log(BK_LOG_INFO, "preview from %s: port %u, %s; %llu bytes in, %llu out, %llu us", r->peer, r->rq.port,
	       outcome, (unsigned long long)moved[0], (unsigned long long)moved[1],
	       (unsigned long long)bk_elapsed_us(&r->started));
	close(r->client);
	if (r->upstream >= 0)
		close(r->upstream);
	relay_done(r->px, r);
	free(r);
	return NULL;
}

static int refuse(const bk_door_request *req, int code, const char *reason, const char *text, const char *outcome,
		  char **answer, size_t *len)
{
	bk_log(BK_LOG_INFO, "preview from %s: %s", req->peer, outcome);
	bk_door_response(code, reason, "text/plain; charset=utf-8", text, strlen(text), answer, len);
	return 0;
}

/* On the door's thread, a whole head: refused at once unless it is a preview request (one request,
 * framed so that nothing after it is forwarded: httpreq.h) with a token that checks, for a port
 * a process exposes, while no Reset runs; such a request — and only such — takes a relay slot
 * (of BK_PROXY_MAX) and a thread of its own. */
static int serve(void *arg, const bk_door_request *req, char **answer, size_t *len)
{
	struct bk_proxy *px = arg;
	bk_server *srv = px->srv;
	struct relay *r = calloc(1, sizeof(*r));
	pthread_t thread;
	pthread_attr_t attr;
	bool room;
	int code;

	if (!r)
		return refuse(req, 503, "Service Unavailable", "boxkited is out of memory: retry\n", "refused: no memory",
			      answer, len);
	code = bk_httpreq_parse(req->head, req->head_len, &r->rq, r->head, sizeof(r->head), &r->head_len);
	if (code) {
		free(r);
		return refuse(req, code, code == 501 ? "Not Implemented" : "Bad Request",
			      "a preview is /preview/PORT/TOKEN/PATH (bkctl preview PORT prints one)\n",
			      "refused: not a preview request", answer, len);
	}
	bk_keyring_ref *keys = bk_keystore_get(srv->keystore);
	bk_preview_verdict v = bk_preview_token_check(keys ? bk_keyring_ref_ring(keys) : NULL, r->rq.token,
						      (uint16_t)r->rq.port, bk_clock_realtime_ms() / 1000,
						      srv->cfg.preview_ttl_max_ms / 1000, &r->expires_s);
	bk_keyring_ref_put(keys);
	if (v != BK_PREVIEW_OK) {
		char text[128];
		free(r);
		snprintf(text, sizeof(text), "preview token refused: %s\n", bk_preview_verdict_name(v));
		return refuse(req, 403, "Forbidden", text, bk_preview_verdict_name(v), answer, len);
	}
	/* A Reset running (or failed) serves nothing of the sandbox: what exposes the port may be the
	 * last tenant's. */
	if (atomic_load(&srv->gate) != BK_GATE_OPEN) {
		free(r);
		return refuse(req, 503, "Service Unavailable", "the sandbox is being reset: retry\n", "refused: a reset",
			      answer, len);
	}
	if (!bk_processes_exposing(srv, r->rq.port)) {
		free(r);
		return refuse(req, 404, "Not Found", "no process exposes this port (bkctl start --expose PORT)\n",
			      "refused: no process exposes the port", answer, len);
	}
	clock_gettime(CLOCK_MONOTONIC, &r->started);
	r->px = px;
	r->client = req->fd;
	r->upstream = -1;
	snprintf(r->peer, sizeof(r->peer), "%s", req->peer);
	memcpy(r->rest, req->rest, req->rest_len);
	r->rest_len = req->rest_len;
	/* Listed from the start: a Reset cuts it wherever it is. */
	pthread_mutex_lock(&px->lock);
	room = px->active < BK_PROXY_MAX;
	if (room) {
		px->active++;
		r->next = px->relays;
		px->relays = r;
	}
	pthread_mutex_unlock(&px->lock);
	if (!room) {
		free(r);
		return refuse(req, 503, "Service Unavailable", "too many previews at once: retry\n",
			      "refused: every relay is in use", answer, len);
	}
	/* Blocking from here on, like the upstream side (each with its send timeout). */
	fcntl(r->client, F_SETFL, fcntl(r->client, F_GETFL) & ~O_NONBLOCK);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	int rv = pthread_create(&thread, &attr, relay_main, r);
	pthread_attr_destroy(&attr);
	if (rv != 0) {
		relay_done(px, r);
		free(r);
		return refuse(req, 503, "Service Unavailable", "boxkited cannot take a preview now: retry\n",
			      "refused: no thread", answer, len);
	}
	return 1;
}

int bk_proxy_start(bk_server *srv, bk_error **err)
{
	struct bk_proxy *px;
	int ret;

	if (!srv->cfg.preview_listen)
		return 0;
	px = calloc(1, sizeof(*px));
	if (!px)
		return bk_error_errno(err, ENOMEM, "preview listener");
	srv->proxy = px;
	px->srv = srv;
	pthread_mutex_init(&px->lock, NULL);
	pthread_cond_init(&px->idle, NULL);
	px->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (px->stop_fd < 0)
		return bk_error_errno(err, errno, "preview listener");
	if ((ret = bk_door_open(srv->cfg.preview_listen, "--preview-listen", serve, px, &px->door, err)) < 0)
		return ret;
	bk_log(BK_LOG_INFO, "previews on %s/preview/PORT/TOKEN/", srv->cfg.preview_listen);
	return 0;
}

void bk_proxy_stop(bk_server *srv)
{
	struct bk_proxy *px = srv->proxy;
	uint64_t one = 1;

	if (!px)
		return;
	/* No new relay (the door's handler is the only one to start them), then every relay ends. */
	bk_door_close(px->door);
	if (px->stop_fd >= 0 && write(px->stop_fd, &one, sizeof(one)) < 0)
		bk_log(BK_LOG_ERROR, "preview listener: cannot stop: %s", strerror(errno));
	pthread_mutex_lock(&px->lock);
	while (px->active)
		pthread_cond_wait(&px->idle, &px->lock);
	pthread_mutex_unlock(&px->lock);
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
