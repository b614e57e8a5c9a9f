/* The second listener (--http-listen): plain HTTP through the door (transport/door.h: bounded
 * connections, a deadline for each request), no key, serving
 *   GET /livez    200 while boxkited runs (and is not shutting down);
 *   GET /readyz   200 when the sandbox is found and the executor answered a ping in the last
 *                 few seconds, else 503 and why;
 *   GET /metrics  Prometheus text (server/transport/metrics.c).
 * Nothing here runs a command or touches a file: what it tells is what Health tells, plus
 * counters. NetworkPolicy gives it to the kubelet's probes and a labelled scraper only. */
#ifndef BK_HTTP_H
#define BK_HTTP_H

#include "rpc/server.h"

/* Listen on srv->cfg.http_listen, if set (before the front gives up root, like the others). */
int bk_http_start(bk_server *srv, bk_error **err);
/* Ping the executor, once a second from the main loop: /readyz wants a recent answer. */
void bk_http_tick(bk_server *srv);
void bk_http_stop(bk_server *srv);

#endif
