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

#define IDLE_MS (10 * 60 * 1000) /* a relay that moves nothing either way this long ends */
#define SEND_TIMEOUT_S 30        /* a peer that takes nothing this long ends its relay */
#define CONNECT_WAIT_MS 5000     /* for the exposed port to take the connection */
#define RELAY_BUF (64 * 1024)

struct bk_proxy {
	bk_server *srv;
	bk_door *door;
	int stop_fd;             /* readable once the relays are to end */
	pthread_mutex_t lock;
	pthread_cond_t idle;
	unsigned active;         /* relays running */
};

struct target {
	const char *method, *version;
	size_t method_len, version_len;
	unsigned port;
	char token[BK_PREVIEW_TOKEN_MAX];
	const char *rest;        /* what follows the token: "/..." or "?...", or "" */
	size_t rest_len;
};

/* A preview whose token checked: the connection, and the request as it came, for its thread. */
struct relay {
	struct bk_proxy *px;
	int client, upstream;
	struct target t;
	char peer[64];
	size_t line_end;         /* where the request line ends in head */
	size_t len;              /* head and what came after it */
	char head[BK_DOOR_HEAD_MAX];
	struct timespec started;
};

/* METHOD SP /preview/PORT/TOKEN[/REST] SP HTTP/1.x CRLF */
static bool parse_target(const char *line, size_t len, struct target *t)
{
	const char *sp1 = memchr(line, ' ', len), *sp2, *at, *tok, *tok_end;
	const char *end = line + len;
	char *digits_end;
	unsigned long port;

	if (!sp1 || sp1 == line)
		return false;
	sp2 = memchr(sp1 + 1, ' ', (size_t)(end - sp1 - 1));
	if (!sp2 || end - sp2 - 1 < 8 || memcmp(sp2 + 1, "HTTP/1.", 7) != 0)
		return false;
	t->method = line;
	t->method_len = (size_t)(sp1 - line);
	t->version = sp2 + 1;
	t->version_len = (size_t)(end - sp2 - 1);
	at = sp1 + 1;
	if (sp2 - at < 10 || memcmp(at, "/preview/", 9) != 0)
		return false;
	at += 9;
	if (*at < '1' || *at > '9')
		return false;
	port = strtoul(at, &digits_end, 10);
	if (port > 65535 || digits_end >= sp2 || *digits_end != '/')
		return false;
	t->port = (unsigned)port;
	tok = digits_end + 1;
	for (tok_end = tok; tok_end < sp2 && *tok_end != '/' && *tok_end != '?'; tok_end++)
		;
	if (tok_end == tok || (size_t)(tok_end - tok) >= sizeof(t->token))
		return false;
	memcpy(t->token, tok, (size_t)(tok_end - tok));
	t->token[tok_end - tok] = '\0';
	t->rest = tok_end;
	t->rest_len = (size_t)(sp2 - tok_end);
	return true;
}

/* Wait for a connection begun on the non-blocking fd to be made, up to CONNECT_WAIT_MS (or the
 * stop): 0 with fd blocking again, or -errno (-ETIMEDOUT: a listener that does not accept). */
static int connect_wait(struct bk_proxy *px, int fd)
{
	struct pollfd p[2] = { { .fd = fd, .events = POLLOUT }, { .fd = px->stop_fd, .events = POLLIN } };
	int64_t deadline = bk_clock_monotonic_ms() + CONNECT_WAIT_MS;
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

/* Bytes both ways until both sides have closed theirs, or nothing moves for IDLE_MS. */
static void relay_bytes(struct relay *r, uint64_t moved[2])
{
	int fds[2] = { r->client, r->upstream };
	bool open[2] = { true, true };
	char buf[RELAY_BUF];

	while (open[0] || open[1]) {
		struct pollfd p[3] = { { .fd = open[0] ? fds[0] : -1, .events = POLLIN },
				       { .fd = open[1] ? fds[1] : -1, .events = POLLIN },
				       { .fd = r->px->stop_fd, .events = POLLIN } };
		int n = poll(p, 3, IDLE_MS);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || (p[2].revents & POLLIN))
			return;
		for (int i = 0; i < 2; i++) {
			if (!open[i] || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			ssize_t got = recv(fds[i], buf, sizeof(buf), 0);
			if (got < 0 && errno == EINTR)
				continue;
			if (got <= 0) {
				/* This side is done: the other hears its end, and may still answer. */
				open[i] = false;
				shutdown(fds[1 - i], SHUT_WR);
				continue;
			}
			if (bk_write_full(fds[1 - i], (const uint8_t *)buf, (size_t)got) < 0)
				return;
			moved[i] += (uint64_t)got;
		}
	}
}

/* A relay slot given back (the stop waits for all of them). */
static void relay_done(struct bk_proxy *px)
{
	pthread_mutex_lock(&px->lock);
	if (--px->active == 0)
		pthread_cond_broadcast(&px->idle);
	pthread_mutex_unlock(&px->lock);
}

static void *relay_main(void *arg)
{
	struct relay *r = arg;
	struct timeval tv = { .tv_sec = SEND_TIMEOUT_S };
	uint64_t moved[2] = { 0, 0 };
	const char *outcome = "relayed";
	char *answer = NULL;
	size_t answer_len = 0;

	setsockopt(r->client, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	r->upstream = connect_upstream(r->px, r->t.port);
	if (r->upstream < 0) {
		char text[160];
		int n = snprintf(text, sizeof(text), "the process exposing port %u does not answer: %s\n", r->t.port,
				 strerror(-r->upstream));
		if (bk_door_response(502, "Bad Gateway", "text/plain; charset=utf-8", text, (size_t)n, &answer,
				     &answer_len) == 0)
			(void)bk_write_full(r->client, (const uint8_t *)answer, answer_len);
		free(answer);
		outcome = "refused: the port does not answer";
		goto out;
	}
	setsockopt(r->upstream, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	/* The request line without the preview's part of the path, then the rest as it came. */
	char line[BK_DOOR_HEAD_MAX + 64];
	int n = snprintf(line, sizeof(line), "%.*s %s%.*s %.*s", (int)r->t.method_len, r->t.method,
			 r->t.rest_len && r->t.rest[0] == '/' ? "" : "/", (int)r->t.rest_len, r->t.rest,
			 (int)r->t.version_len, r->t.version);
	if (n < 0 || (size_t)n >= sizeof(line) || bk_write_full(r->upstream, (const uint8_t *)line, (size_t)n) < 0 ||
	    bk_write_full(r->upstream, (const uint8_t *)r->head + r->line_end, r->len - r->line_end) < 0) {
		outcome = "failed: the request did not go through";
		goto out;
	}
	relay_bytes(r, moved);
out:
	bk_log(BK_LOG_INFO, "preview from %s: port %u, %s; %llu bytes in, %llu out, %llu us", r->peer, r->t.port,
	       outcome, (unsigned long long)moved[0], (unsigned long long)moved[1],
	       (unsigned long long)bk_elapsed_us(&r->started));
	close(r->client);
	if (r->upstream >= 0)
		close(r->upstream);
	relay_done(r->px);
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

/* On the door's thread, a whole head: refused at once unless it is a preview request with a
 * token that checks, for a port a process exposes; such a request — and only such — takes a
 * relay slot (of BK_PROXY_MAX) and a thread of its own. */
static int serve(void *arg, const bk_door_request *req, char **answer, size_t *len)
{
	struct bk_proxy *px = arg;
	bk_server *srv = px->srv;
	const char *line_end = memmem(req->head, req->head_len, "\r\n", 2);
	struct target t = { 0 };
	struct relay *r;
	pthread_t thread;
	pthread_attr_t attr;
	bool room;

	if (!parse_target(req->head, (size_t)(line_end - req->head), &t))
		return refuse(req, 400, "Bad Request", "a preview is /preview/PORT/TOKEN/PATH (bkctl preview PORT prints one)\n",
			      "refused: not a preview request", answer, len);
	bk_keyring_ref *keys = bk_keystore_get(srv->keystore);
	bk_preview_verdict v = bk_preview_token_check(keys ? bk_keyring_ref_ring(keys) : NULL, t.token,
						      (uint16_t)t.port, bk_clock_realtime_ms() / 1000,
						      srv->cfg.preview_ttl_max_ms / 1000);
	bk_keyring_ref_put(keys);
	if (v != BK_PREVIEW_OK) {
		char text[128];
		snprintf(text, sizeof(text), "preview token refused: %s\n", bk_preview_verdict_name(v));
		return refuse(req, 403, "Forbidden", text, bk_preview_verdict_name(v), answer, len);
	}
	if (!bk_processes_exposing(srv, t.port))
		return refuse(req, 404, "Not Found", "no process exposes this port (bkctl start --expose PORT)\n",
			      "refused: no process exposes the port", answer, len);
	pthread_mutex_lock(&px->lock);
	room = px->active < BK_PROXY_MAX;
	if (room)
		px->active++;
	pthread_mutex_unlock(&px->lock);
	r = room ? calloc(1, sizeof(*r)) : NULL;
	if (!r) {
		if (room)
			relay_done(px);
		return refuse(req, 503, "Service Unavailable", "too many previews at once: retry\n",
			      "refused: every relay is in use", answer, len);
	}
	clock_gettime(CLOCK_MONOTONIC, &r->started);
	r->px = px;
	r->client = req->fd;
	r->upstream = -1;
	snprintf(r->peer, sizeof(r->peer), "%s", req->peer);
	r->len = req->head_len + req->rest_len;
	memcpy(r->head, req->head, r->len);
	r->line_end = (size_t)(line_end - req->head);
	/* The target's pointers into the head, moved to the relay's copy. */
	r->t = t;
	r->t.method = r->head + (t.method - req->head);
	r->t.version = r->head + (t.version - req->head);
	r->t.rest = r->head + (t.rest - req->head);
	/* Blocking from here on, like the upstream side (each with its send timeout). */
	fcntl(r->client, F_SETFL, fcntl(r->client, F_GETFL) & ~O_NONBLOCK);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	int rv = pthread_create(&thread, &attr, relay_main, r);
	pthread_attr_destroy(&attr);
	if (rv != 0) {
		free(r);
		relay_done(px);
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
