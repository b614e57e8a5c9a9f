/* What the egress proxy reads from a sandboxed command, parsed strictly: the head of an HTTP/1.x
 * request, a chunked request body's framing, and the server name of a TLS ClientHello. Every
 * byte here comes from the sandbox (or, through it, from anything the command was told), so
 * whatever two readers of HTTP could disagree on is refused rather than interpreted: bare LF or
 * CR, folded lines, whitespace before a colon, control bytes, two Content-Lengths (even equal),
 * Content-Length beside Transfer-Encoding, any coding but chunked, two Host headers, userinfo,
 * a fragment. Pure functions over buffers: unit-tested (tests/unit/test_httpparse.c) and fuzzed
 * (tests/fuzz/fuzz_httpparse.c). */
#ifndef BK_EGRESS_HTTPPARSE_H
#define BK_EGRESS_HTTPPARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define BK_HTTP_HEADERS_MAX 100
#define BK_HTTP_METHOD_MAX 32

typedef struct bk_http_span {
	const char *p;
	size_t len;
} bk_http_span;

typedef struct bk_http_header {
	bk_http_span name, value; /* value without its surrounding whitespace */
} bk_http_header;

typedef enum bk_http_form {
	BK_HTTP_AUTHORITY, /* CONNECT host:port */
	BK_HTTP_ABSOLUTE,  /* GET http://host[:port]/path */
	BK_HTTP_ORIGIN,    /* GET /path, its host in the Host header: inside a tunnel */
} bk_http_form;

typedef struct bk_http_request {
	bk_http_span method;
	bk_http_form form;
	bk_http_span host;         /* AUTHORITY, ABSOLUTE: as the target wrote it ([v6] bracketed) */
	uint16_t port;             /* AUTHORITY, ABSOLUTE: the target's (ABSOLUTE: 80 if none) */
	bk_http_span path;         /* ABSOLUTE, ORIGIN: path and query, as sent on ("" for "/") */
	int minor;                 /* HTTP/1.minor: 0 or 1 */
	bk_http_header headers[BK_HTTP_HEADERS_MAX];
	size_t n_headers;
	const bk_http_header *host_header; /* NULL when none */
	int64_t content_length;    /* -1: none */
	bool chunked;
	bool upgrade;              /* an Upgrade header */
	size_t head_len;           /* bytes of the head, its empty line included */
} bk_http_request;

/* Parse the head at the start of buf (len bytes, at most max looked at). 1 when it is whole (rq
 * filled, pointing into buf); 0 when more bytes may complete it (len < max and nothing wrong so
 * far); -EINVAL when it is malformed or larger than max, with the status to answer (400, 414,
 * 431, 501, 505) and why. */
int bk_http_request_parse(const char *buf, size_t len, size_t max, bk_http_request *rq, int *status,
			  const char **why);

/* The first header named name (ASCII case-insensitive), or NULL. */
const bk_http_header *bk_http_header_find(const bk_http_request *rq, const char *name);

/* Split an authority (a target's, a Host header's) into host and port: "host", "host:port",
 * "[v6]", "[v6]:port"; *port is default_port when it has none (0: a port is required). 0, or
 * -EINVAL with *why. */
int bk_http_authority_split(bk_http_span a, uint16_t default_port, bk_http_span *host, uint16_t *port,
			    const char **why);

/* The head to send upstream for a request: the request line in origin form (ABSOLUTE) or as it
 * came (ORIGIN), then every header but the hop-by-hop ones (Connection and the names it lists,
 * Proxy-Connection, Keep-Alive, Proxy-Authorization, TE, Upgrade) and those named in strip,
 * then a Host header when the request had none (ABSOLUTE), the add bytes (whole header lines),
 * "Connection: close" and the empty line. The proxy forwards one request per connection.
 * Returns its length, or -ENOSPC when it does not fit in size. */
ssize_t bk_http_forward_head(const bk_http_request *rq, const char *const *strip, size_t n_strip, const char *add,
			     size_t add_len, char *out, size_t size);

/* --- a chunked body -------------------------------------------------------------------------- */

typedef struct bk_http_chunked {
	int state;
	uint64_t remaining;  /* of the current chunk's data */
	size_t line;         /* bytes of the current size or trailer line */
	size_t trailers;     /* bytes of trailers so far */
} bk_http_chunked;

/* Feed the next n bytes of a chunked body. *used: how many of them belong to it. 1 when the body
 * ended within them (the rest is not the body's), 0 when more are needed, -EINVAL (why) when
 * the framing is malformed. */
int bk_http_chunked_feed(bk_http_chunked *c, const uint8_t *p, size_t n, size_t *used, const char **why);

/* --- TLS ------------------------------------------------------------------------------------- */

/* The TLS ClientHello at the start of buf: 1 with its server name (the first host_name of its
 * server_name extension, NUL-terminated) in name; 0 when it has none; -EAGAIN when more bytes
 * are needed; -EINVAL when buf does not start with a well-formed ClientHello (or one longer than
 * 16 KiB, or a name that does not fit in size). */
int bk_tls_hello_sni(const uint8_t *buf, size_t len, char *name, size_t size);

/* Whether buf could be the start of a TLS record carrying a handshake (a ClientHello). */
bool bk_tls_looks_like_hello(const uint8_t *buf, size_t len);

#endif
