#include "transport/http.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "boundary/link.h"
#include "clock.h"
#include "transport/door.h"
#include "log.h"

/* The executor must have answered a ping within this long for /readyz (pings go every second). */
#define EXECUTOR_FRESH_MS 3000

struct bk_http {
	bk_door *door;
	atomic_bool ping_pending;
};

static int respond(uint16_t code, const char *reason, const char *type, const char *body, size_t len, char **answer,
		   size_t *answer_len)
{
	bk_door_response(code, reason, type, body, len, answer, answer_len);
	return 0;
}

static int livez(bk_server *srv, char **answer, size_t *len)
{
	if (atomic_load(&srv->stopping))
		return respond(503, "Service Unavailable", "text/plain", "stopping\n", 9, answer, len);
	return respond(200, "OK", "text/plain", "ok\n", 3, answer, len);
}

static int readyz(bk_server *srv, char **answer, size_t *len)
{
	int64_t answered = atomic_load(&srv->metrics.executor_answered_ms);
	const char *why = NULL;
	char body[96];

	if (atomic_load(&srv->stopping))
		why = "stopping";
	else if (!srv->executor || answered < 0 || bk_clock_monotonic_ms() - answered > EXECUTOR_FRESH_MS)
		why = "the executor does not answer";
	else if (!atomic_load(&srv->sandbox_ready))
		why = "the sandbox is not found";
	else if (bk_server_failure(srv))
		why = "a reset failed: discard this sidecar";
	if (why) {
		int n = snprintf(body, sizeof(body), "not ready: %s\n", why);
		return respond(503, "Service Unavailable", "text/plain", body, (size_t)n, answer, len);
	}
	return respond(200, "OK", "text/plain", "ready\n", 6, answer, len);
}

static int metrics(bk_server *srv, char **answer, size_t *len)
{
	char *text = NULL;
	size_t text_len = 0;
	FILE *out = open_memstream(&text, &text_len);

	if (!out)
		return 0;
	bk_metrics_write(srv, out);
	if (fclose(out) == 0)
		respond(200, "OK", "text/plain; version=0.0.4; charset=utf-8", text, text_len, answer, len);
	free(text);
	return 0;
}

/* GET of one of three paths, answered on the door's thread from atomics: nothing here waits. */
static int serve(void *arg, const bk_door_request *req, char **answer, size_t *len)
{
	static const struct {
		const char *path;
		int (*fn)(bk_server *, char **, size_t *);
	} routes[] = { { "/livez", livez }, { "/readyz", readyz }, { "/metrics", metrics } };
	const char *line_end = memmem(req->head, req->head_len, "\r\n", 2);
	const char *sp = memchr(req->head, ' ', (size_t)(line_end - req->head));
	const char *path = sp ? sp + 1 : line_end;
	size_t path_len = strcspn(path, " ?\r");

	for (size_t i = 0; i < BK_ARRAY_SIZE(routes); i++) {
		if (path_len != strlen(routes[i].path) || memcmp(path, routes[i].path, path_len) != 0)
			continue;
		if (sp - req->head != 3 || memcmp(req->head, "GET", 3) != 0) {
			static const char text[] = "GET only\n";
			return respond(405, "Method Not Allowed", "text/plain", text, sizeof(text) - 1, answer, len);
		}
		return routes[i].fn(arg, answer, len);
	}
	static const char text[] = "GET /livez, /readyz or /metrics\n";
	return respond(404, "Not Found", "text/plain", text, sizeof(text) - 1, answer, len);
}

int bk_http_start(bk_server *srv, bk_error **err)
{
	struct bk_http *h;
	int ret;

	if (!srv->cfg.http_listen)
		return 0;
	h = calloc(1, sizeof(*h));
	if (!h)
		return bk_error_errno(err, ENOMEM, "http");
	srv->http = h;
	if ((ret = bk_door_open(srv->cfg.http_listen, "--http-listen", serve, srv, &h->door, err)) < 0)
		return ret;
	bk_log(BK_LOG_INFO, "http: /livez /readyz /metrics on %s", srv->cfg.http_listen);
	return 0;
}

/* err 0: a Pong, which carries no descriptor (its row in link.c). */
static void pinged(void *arg, int err, bk_reply *reply, int *fds, size_t nfds)
{
	bk_server *srv = arg;

	(void)fds;
	(void)nfds;
	if (!err) {
		bk_server_set_sandbox_state(srv, reply->pong);
		atomic_store(&srv->metrics.executor_answered_ms, bk_clock_monotonic_ms());
	}
	bk_reply_free(reply);
	atomic_store(&srv->http->ping_pending, false);
}

void bk_http_tick(bk_server *srv)
{
	Boxkite__Executor__Ping ping = BOXKITE__EXECUTOR__PING__INIT;
	bk_order order = BOXKITE__EXECUTOR__ORDER__INIT;

	/* One ping at a time: an executor that does not answer is not sent a queue of them. */
	if (!srv->http || !srv->executor || atomic_exchange(&srv->http->ping_pending, true))
		return;
	order.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_PING;
	order.ping = &ping;
	bk_link_send(srv->executor, &order, NULL, 0, 0, pinged, srv);
}

void bk_http_stop(bk_server *srv)
{
	struct bk_http *h = srv->http;

	if (!h)
		return;
	bk_door_close(h->door);
	free(h);
	srv->http = NULL;
}
