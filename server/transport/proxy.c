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

#define HEAD_MAX (16 * 1024)     /* a request line and headers larger than this: 431 */
#define HEAD_WAIT_MS 10000       /* for the request's head to arrive */
#define IDLE_MS (10 * 60 * 1000) /* a relay that moves nothing either way this long ends */
#define SEND_TIMEOUT_S 30        /* a peer that takes nothing this long ends its relay */
#define RELAY_BUF (64 * 1024)

struct bk_proxy {
	bk_server *srv;
	int lfd, stop_fd;
	pthread_t thread;
	bool thread_started;
	pthread_mutex_t lock;
	pthread_cond_t idle;
	unsigned active;         /* relays running */
};

struct relay {
	struct bk_proxy *px;
	int client, upstream;
	char peer[64];
	char head[HEAD_MAX + 1];
	size_t head_len;         /* bytes received, the head and whatever followed it */
	size_t head_end;         /* the head's length, its blank line included */
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

struct target {
	const char *method, *version;
	size_t method_len, version_len;
	unsigned port;
	char token[BK_PREVIEW_TOKEN_MAX];
	const char *rest;        /* what follows the token: "/..." or "?...", or "" */
	size_t rest_len;
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
	bk_server *srv = r->px->srv;
	struct timeval tv = { .tv_sec = SEND_TIMEOUT_S };
	struct timespec started;
	struct target t = { 0 };
	uint64_t moved[2] = { 0, 0 };
	const char *line_end;
	const char *outcome = "relayed";
	int code;

	clock_gettime(CLOCK_MONOTONIC, &started);
	setsockopt(r->client, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	code = read_head(r);
	line_end = code ? NULL : memmem(r->head, r->head_end, "\r\n", 2);
	if (code || !parse_target(r->head, (size_t)(line_end - r->head), &t)) {
		respond(r->client, code ? code : 400, code == 431 ? "Request Header Fields Too Large"
						 : code == 408 ? "Request Timeout" : "Bad Request",
			"a preview is /preview/PORT/TOKEN/PATH (bkctl preview PORT prints one)\n");
		outcome = "refused: not a preview request";
		goto out;
	}
	bk_keyring_ref *keys = bk_keystore_get(srv->keystore);
	bk_preview_verdict v = bk_preview_token_check(keys ? bk_keyring_ref_ring(keys) : NULL, t.token,
						      (uint16_t)t.port, bk_clock_realtime_ms() / 1000,
						      srv->cfg.preview_ttl_max_ms / 1000);
	bk_keyring_ref_put(keys);
	if (v != BK_PREVIEW_OK) {
		char text[128];
		snprintf(text, sizeof(text), "preview token refused: %s\n", bk_preview_verdict_name(v));
		respond(r->client, 403, "Forbidden", text);
		outcome = bk_preview_verdict_name(v);
		goto out;
	}
	if (!bk_processes_exposing(srv, t.port)) {
		respond(r->client, 404, "Not Found", "no process exposes this port (bkctl start --expose PORT)\n");
		outcome = "refused: no process exposes the port";
		goto out;
	}
	r->upstream = connect_upstream(srv, t.port);
	if (r->upstream < 0) {
		char text[160];
		snprintf(text, sizeof(text), "the process exposing port %u does not answer: %s\n", t.port,
			 strerror(-r->upstream));
		respond(r->client, 502, "Bad Gateway", text);
		outcome = "refused: the port does not answer";
		goto out;
	}
	setsockopt(r->upstream, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	/* The request line without the preview's part of the path, then the rest as it came. */
	char line[HEAD_MAX + 64];
	int n = snprintf(line, sizeof(line), "%.*s %s%.*s %.*s", (int)t.method_len, t.method,
			 t.rest_len && t.rest[0] == '/' ? "" : "/", (int)t.rest_len, t.rest, (int)t.version_len, t.version);
	if (n < 0 || (size_t)n >= sizeof(line) || bk_write_full(r->upstream, (const uint8_t *)line, (size_t)n) < 0 ||
	    bk_write_full(r->upstream, (const uint8_t *)line_end, r->head_len - (size_t)(line_end - r->head)) < 0) {
		outcome = "failed: the request did not go through";
		goto out;
	}
	relay_bytes(r, moved);
out:
	bk_log(BK_LOG_INFO, "preview from %s: port %u, %s; %llu bytes in, %llu out, %llu us", r->peer,
	       t.port, outcome, (unsigned long long)moved[0], (unsigned long long)moved[1],
	       (unsigned long long)bk_elapsed_us(&started));
	close(r->client);
	if (r->upstream >= 0)
		close(r->upstream);
	relay_done(r->px);
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
		pthread_mutex_lock(&px->lock);
		bool room = px->active < BK_PROXY_MAX;
		if (room)
			px->active++;
		pthread_mutex_unlock(&px->lock);
		r = room ? calloc(1, sizeof(*r)) : NULL;
		if (!r) {
			respond(fd, 503, "Service Unavailable", "too many previews at once: retry\n");
			close(fd);
			if (room)
				relay_done(px);
			continue;
		}
		r->px = px;
		r->client = fd;
		r->upstream = -1;
		if (getnameinfo((struct sockaddr *)&from, from_len, r->peer, sizeof(r->peer), NULL, 0, NI_NUMERICHOST))
			snprintf(r->peer, sizeof(r->peer), "?");
		pthread_attr_t attr;
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		if (pthread_create(&t, &attr, relay_main, r) != 0) {
			respond(fd, 503, "Service Unavailable", "boxkited cannot take a preview now: retry\n");
			close(fd);
			free(r);
			relay_done(px);
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
