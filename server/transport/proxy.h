/* Previews (docs/PROTOCOL.md, "Previews"): `--preview-listen http://HOST:PORT` relays
 *
 *     METHOD /preview/PORT/TOKEN/REST HTTP/1.x
 *
 * to 127.0.0.1:PORT in the sandbox's network namespace as `METHOD /REST HTTP/1.x`, with the rest
 * of the connection relayed byte for byte both ways (so WebSocket upgrades and streamed answers
 * work) — for the holder of a preview token for that port (common/preview.h), and only while a
 * background process exposes it. A connection is refused, before anything reaches the sandbox,
 * with 400 (not a preview request), 403 (a token that does not check), 404 (no process exposes
 * the port) or 503 (too many previews at once). */
#ifndef BK_PROXY_H
#define BK_PROXY_H

#include "error.h"
#include "rpc/server.h"

/* Previews open at once; one more is answered 503. */
#define BK_PROXY_MAX 64

/* Listen (before boxkited gives up root: the port may be a low one) and serve; nothing when no
 * --preview-listen was given. */
int bk_proxy_start(bk_server *srv, bk_error **err);
/* Stop accepting, end every relay and wait for them. */
void bk_proxy_stop(bk_server *srv);

#endif
