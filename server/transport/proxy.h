/* Previews (docs/PROTOCOL.md, "Previews"): `--preview-listen http://HOST:PORT` relays
 *
 *     METHOD /preview/PORT/TOKEN/REST HTTP/1.x
 *
 * to 127.0.0.1:PORT in the sandbox's network namespace as `METHOD /REST HTTP/1.x`, its headers
 * and body as they came — for the holder of a preview token for that port (common/preview.h),
 * and only while a background process exposes it. One request per connection (httpreq.h), each
 * with its token checked; an upgrade answered 101 becomes a tunnel both ways (WebSocket), and
 * streamed answers are relayed as they come; a connection ends at its token's expiry and at a
 * Reset. A connection is refused, before anything reaches the sandbox, with 400 (not a preview
 * request), 403 (a token that does not check), 404 (no process exposes the port) or 503 (too
 * many previews at once, or a Reset running). */
#ifndef BK_PROXY_H
#define BK_PROXY_H

#include "error.h"
#include "rpc/server.h"

/* Previews open at once, each for a request whose token checked; one more is answered 503. */
#define BK_PROXY_MAX 64
/* How long the exposed port has to take the connection (then 502); how long a relay may move
 * nothing either way, and a peer take nothing sent to it, before the relay ends. */
#define BK_PROXY_CONNECT_WAIT_MS 5000
#define BK_PROXY_IDLE_MS (10 * 60 * 1000)
#define BK_PROXY_SEND_TIMEOUT_S 30

/* Listen (before boxkited gives up root: the port may be a low one) and serve; nothing when no
 * --preview-listen was given. */
int bk_proxy_start(bk_server *srv, bk_error **err);
/* Stop accepting, end every relay and wait for them. */
void bk_proxy_stop(bk_server *srv);

/* A Reset: end every preview connection open now (their sockets shut down both ways) and wait
 * until each has ended; connections that come while the reset runs are refused 503. */
void bk_proxy_cut_all(bk_server *srv);

#endif
