/* One HTTP/1.x request on a preview connection (docs/PROTOCOL.md, "Previews"): its head parsed
 * and rewritten for the sandbox's port, and its body's framing, so that the relay (proxy.c)
 * forwards exactly this request and nothing after it. Each request a client sends therefore
 * comes on a connection of its own, and its token is checked — a kept-alive connection cannot
 * carry a second request past an expired token or a Reset. An upgrade (WebSocket) is the one
 * request of its connection, and a tunnel once the sandbox answers 101. Pure: no I/O. */
#ifndef BK_HTTPREQ_H
#define BK_HTTPREQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "preview.h"

/* A chunk-size or trailer line longer than this is refused (the body is malformed). */
#define BK_HTTPREQ_LINE_MAX 4096

enum bk_httpreq_body {
	BK_HTTPREQ_NONE,    /* no body */
	BK_HTTPREQ_LENGTH,  /* Content-Length bytes */
	BK_HTTPREQ_CHUNKED, /* Transfer-Encoding: chunked, up to its last chunk and trailers */
};

typedef struct bk_httpreq {
	unsigned port;
	char token[BK_PREVIEW_TOKEN_MAX];
	bool upgrade;               /* Upgrade asked (Connection names it): a tunnel if answered 101 */
	enum bk_httpreq_body body;
	uint64_t left;              /* LENGTH: bytes to come; CHUNKED: of the current chunk's data */
	int chunk_state;            /* CHUNKED: where in the framing (httpreq.c) */
	size_t line_len;            /* CHUNKED: bytes of the current size or trailer line */
	char last;                  /* CHUNKED: its last byte so far */
	char line[24];              /* CHUNKED: the start of a size line (its hex digits) */
} bk_httpreq;

/* Parse a request's head (head_len bytes, its blank line included) into rq, and write into out
 * the head to send to the sandbox: the request line without the preview's part of the path, the
 * headers without Connection, Keep-Alive and Proxy-Connection, then "Connection: close" (or, for
 * an upgrade, "Connection: Upgrade"). out_size of head_len + 64 suffices. Returns 0 with
 * *out_len set, or the HTTP status to refuse the request with: 400 (not METHOD
 * /preview/PORT/TOKEN[/...] HTTP/1.x of visible characters with a base64url TOKEN, a NUL byte, a
 * line not ended by CRLF, a folded header, a Content-Length that is not one number, or one beside
 * a Transfer-Encoding), 501 (a transfer coding other than chunked). */
int bk_httpreq_parse(const char *head, size_t head_len, bk_httpreq *rq, char *out, size_t out_size,
		     size_t *out_len);

/* How many of the len bytes at buf are the request's body (to be forwarded as they are); *done
 * once the body has ended — whatever follows is not this request's. -1: a malformed chunked
 * body. */
ssize_t bk_httpreq_body(bk_httpreq *rq, const char *buf, size_t len, bool *done);

/* Whether the start of the sandbox's answer (len bytes at buf, at least 13 to tell) is a 101
 * Switching Protocols: 1, 0 no, -1 too short to tell yet. */
int bk_httpreq_switched(const char *buf, size_t len);

#endif
