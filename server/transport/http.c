#include "transport/http.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/supplemental/http/http.h>

#include "boundary/link.h"
#include "log.h"

/* The executor must have answered a ping within this long for /readyz (pings go every second). */
#define EXECUTOR_FRESH_MS 3000

struct bk_http {
	nng_url *url;
	nng_http_server *server;
	atomic_bool ping_pending;
};

static void respond(nng_aio *aio, uint16_t code, const char *type, const char *body, size_t len)
{
	nng_http_res *res = NULL;
	int rv = nng_http_res_alloc(&res);

	if (rv == 0)
		rv = nng_http_res_set_status(res, code);
	if (rv == 0)
		rv = nng_http_res_set_header(res, "Content-Type", type);
	if (rv == 0)
		rv = nng_http_res_copy_data(res, body, len);
	if (rv == 0)
		rv = nng_http_res_set_header(res, "Cache-Control", "no-store");
	if (rv) {
		nng_http_res_free(res);
		nng_aio_finish(aio, rv);
		return;
	}
	nng_aio_set_output(aio, 0, res);
	nng_aio_finish(aio, 0);
}

static bk_server *handler_server(nng_aio *aio)
{
	return nng_http_handler_get_data(nng_aio_get_input(aio, 1));
}

static void handle_livez(nng_aio *aio)
{
	bk_server *srv = handler_server(aio);

	if (atomic_load(&srv->stopping))
		respond(aio, 503, "text/plain", "stopping\n", 9);
	else
		respond(aio, 200, "text/plain", "ok\n", 3);
}

static void handle_readyz(nng_aio *aio)
{
	bk_server *srv = handler_server(aio);
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
		respond(aio, 503, "text/plain", body, (size_t)n);
	} else {
		respond(aio, 200, "text/plain", "ready\n", 6);
	}
}

static void handle_metrics(nng_aio *aio)
{
	bk_server *srv = handler_server(aio);
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);

	if (!out) {
		nng_aio_finish(aio, NNG_ENOMEM);
		return;
	}
	bk_metrics_write(srv, out);
	if (fclose(out) != 0) {
		free(text);
		nng_aio_finish(aio, NNG_ENOMEM);
		return;
	}
	respond(aio, 200, "text/plain; version=0.0.4; charset=utf-8", text, len);
	free(text);
}

int bk_http_start(bk_server *srv, bk_error **err)
{
	static const struct {
		const char *path;
		void (*fn)(nng_aio *);
	} routes[] = { { "/livez", handle_livez }, { "/readyz", handle_readyz }, { "/metrics", handle_metrics } };
	struct bk_http *h;
	int rv;

	if (!srv->cfg.http_listen)
		return 0;
	h = calloc(1, sizeof(*h));
	if (!h)
		return bk_error_errno(err, ENOMEM, "http");
	srv->http = h;
	if ((rv = nng_url_parse(&h->url, srv->cfg.http_listen)) || (rv = nng_http_server_hold(&h->server, h->url)))
		return bk_error_set(err, BK_INVALID_ARGUMENT, EINVAL, "--http-listen %s: %s", srv->cfg.http_listen,
				    nng_strerror(rv));
	for (size_t i = 0; i < BK_ARRAY_SIZE(routes); i++) {
		nng_http_handler *handler = NULL;
		if ((rv = nng_http_handler_alloc(&handler, routes[i].path, routes[i].fn)) ||
		    (rv = nng_http_handler_set_method(handler, "GET")) ||
		    (rv = nng_http_handler_set_data(handler, srv, NULL)) ||
		    (rv = nng_http_server_add_handler(h->server, handler))) {
			if (handler)
				nng_http_handler_free(handler);
			return bk_error_set(err, BK_INTERNAL, EIO, "http handler %s: %s", routes[i].path, nng_strerror(rv));
		}
	}
	if ((rv = nng_http_server_start(h->server)))
		return bk_error_set(err, BK_UNAVAILABLE, rv == NNG_EADDRINUSE ? EADDRINUSE : EIO, "cannot listen on %s: %s",
				    srv->cfg.http_listen, nng_strerror(rv));
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
	if (h->server) {
		nng_http_server_stop(h->server);
		nng_http_server_release(h->server);
	}
	if (h->url)
		nng_url_free(h->url);
	free(h);
	srv->http = NULL;
}
