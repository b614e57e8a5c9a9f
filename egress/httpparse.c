#include "httpparse.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* RFC 9110 §5.6.2: the bytes of a token (method, header name). */
static bool tchar(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* A header value's bytes: visible, obs-text, space and tab; never a control byte. */
static bool vchar(unsigned char c)
{
	return c == ' ' || c == '\t' || (c > 0x20 && c != 0x7f);
}

/* A request target's bytes: visible ASCII (RFC 3986's and then some), never space or control,
 * never obs-text. */
static bool target_char(unsigned char c)
{
	return c > 0x20 && c < 0x7f;
}

static bool span_is(bk_http_span s, const char *lit)
{
	size_t n = strlen(lit);

	return s.len == n && strncasecmp(s.p, lit, n) == 0;
}

static int fail(int *status, int code, const char **why, const char *reason)
{
	*status = code;
	*why = reason;
	return -EINVAL;
}

/* Digits only, 1-65535. */
static int parse_port(const char *p, size_t len, uint16_t *port)
{
	unsigned v = 0;

	if (len == 0 || len > 5)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		if (p[i] < '0' || p[i] > '9')
			return -EINVAL;
		v = v * 10 + (unsigned)(p[i] - '0');
	}
	if (v < 1 || v > 65535)
		return -EINVAL;
	*port = (uint16_t)v;
	return 0;
}

int bk_http_authority_split(bk_http_span a, uint16_t default_port, bk_http_span *host, uint16_t *port,
			    const char **why)
{
	const char *colon = NULL, *end = a.p + a.len;

	if (a.len == 0) {
		*why = "an empty authority";
		return -EINVAL;
	}
	if (memchr(a.p, '@', a.len)) {
		*why = "userinfo in an authority";
		return -EINVAL;
	}
	if (a.p[0] == '[') {
		const char *close = memchr(a.p, ']', a.len);
		if (!close) {
			*why = "an unclosed [ in an authority";
			return -EINVAL;
		}
		if (close + 1 < end && close[1] != ':') {
			*why = "bytes after ] in an authority";
			return -EINVAL;
		}
		host->p = a.p;
		host->len = (size_t)(close + 1 - a.p);
		colon = close + 1 < end ? close + 1 : NULL;
	} else {
		colon = memchr(a.p, ':', a.len);
		host->p = a.p;
		host->len = colon ? (size_t)(colon - a.p) : a.len;
		if (colon && memchr(colon + 1, ':', (size_t)(end - colon - 1))) {
			*why = "an IPv6 address in an authority goes in brackets";
			return -EINVAL;
		}
	}
	if (host->len == 0) {
		*why = "an authority without a host";
		return -EINVAL;
	}
	if (!colon) {
		if (!default_port) {
			*why = "an authority without a port";
			return -EINVAL;
		}
		*port = default_port;
		return 0;
	}
	if (parse_port(colon + 1, (size_t)(end - colon - 1), port) < 0) {
		*why = "an authority's port is 1-65535";
		return -EINVAL;
	}
	return 0;
}

/* The request target, by the method's form. */
static int parse_target(bk_http_request *rq, bk_http_span t, int *status, const char **why)
{
	static const char scheme[] = "http://";

	if (span_is(rq->method, "CONNECT")) {
		rq->form = BK_HTTP_AUTHORITY;
		return bk_http_authority_split(t, 0, &rq->host, &rq->port, why) < 0 ? fail(status, 400, why, *why) : 0;
	}
	if (memchr(t.p, '#', t.len))
		return fail(status, 400, why, "a fragment in a request target");
	if (t.p[0] == '/') {
		rq->form = BK_HTTP_ORIGIN;
		rq->path = t;
		return 0;
	}
	if (t.len >= 8 && strncasecmp(t.p, "https://", 8) == 0)
		return fail(status, 400, why, "an https:// request: ask for a tunnel with CONNECT");
	if (t.len < sizeof(scheme) - 1 || strncasecmp(t.p, scheme, sizeof(scheme) - 1) != 0)
		return fail(status, 400, why, "not a request a proxy serves (CONNECT, or an absolute http:// URI)");
	/* The authority ends at the path or the query. */
	bk_http_span a = { t.p + sizeof(scheme) - 1, 0 };
	const char *end = t.p + t.len, *q = a.p;
	while (q < end && *q != '/' && *q != '?')
		q++;
	a.len = (size_t)(q - a.p);
	rq->form = BK_HTTP_ABSOLUTE;
	rq->path.p = q;
	rq->path.len = (size_t)(end - q);
	if (bk_http_authority_split(a, 80, &rq->host, &rq->port, why) < 0)
		return fail(status, 400, why, *why);
	return 0;
}

/* One line of buf from `at` (its CRLF excluded in *len). 1 when whole, 0 when its end is not
 * there yet, -EINVAL for a bare CR or LF. */
static int next_line(const char *buf, size_t len, size_t at, size_t *line_len)
{
	for (size_t i = at; i < len; i++) {
		if (buf[i] == '\n')
			return -EINVAL; /* a LF without its CR */
		if (buf[i] == '\r') {
			if (i + 1 == len)
				return 0;
			if (buf[i + 1] != '\n')
				return -EINVAL;
			*line_len = i - at;
			return 1;
		}
	}
	return 0;
}

/* Content-Length: digits only, one value, at most 2^62. */
static int parse_length(bk_http_span v, int64_t *out)
{
	uint64_t n = 0;

	if (v.len == 0 || v.len > 18)
		return -EINVAL;
	for (size_t i = 0; i < v.len; i++) {
		if (v.p[i] < '0' || v.p[i] > '9')
			return -EINVAL;
		n = n * 10 + (uint64_t)(v.p[i] - '0');
	}
	*out = (int64_t)n;
	return 0;
}

/* The framing and the headers the proxy acts on. */
static int header_semantics(bk_http_request *rq, const bk_http_header *h, int *status, const char **why)
{
	if (span_is(h->name, "content-length")) {
		if (rq->content_length >= 0)
			return fail(status, 400, why, "two Content-Length headers");
		if (parse_length(h->value, &rq->content_length) < 0)
			return fail(status, 400, why, "a Content-Length that is not one decimal number");
	} else if (span_is(h->name, "transfer-encoding")) {
		if (rq->chunked)
			return fail(status, 400, why, "two Transfer-Encoding headers");
		if (!span_is(h->value, "chunked"))
			return fail(status, 501, why, "a transfer coding other than chunked");
		rq->chunked = true;
	} else if (span_is(h->name, "host")) {
		if (rq->host_header)
			return fail(status, 400, why, "two Host headers");
		rq->host_header = h;
	} else if (span_is(h->name, "upgrade")) {
		rq->upgrade = true;
	}
	return 0;
}

static int parse_header(const char *line, size_t len, bk_http_header *h, int *status, const char **why)
{
	const char *colon = memchr(line, ':', len);
	size_t v, e;

	/* A line that starts with whitespace continues the last (obs-fold): refused. */
	if (line[0] == ' ' || line[0] == '\t')
		return fail(status, 400, why, "a folded header line");
	if (!colon || colon == line)
		return fail(status, 400, why, "a header line without a name and a colon");
	for (const char *c = line; c < colon; c++)
		if (!tchar((unsigned char)*c))
			return fail(status, 400, why, "a header name with a byte that is not a token's (or space before the colon)");
	for (const char *c = colon + 1; c < line + len; c++)
		if (!vchar((unsigned char)*c))
			return fail(status, 400, why, "a control byte in a header value");
	v = (size_t)(colon + 1 - line);
	e = len;
	while (v < e && (line[v] == ' ' || line[v] == '\t'))
		v++;
	while (e > v && (line[e - 1] == ' ' || line[e - 1] == '\t'))
		e--;
	h->name.p = line;
	h->name.len = (size_t)(colon - line);
	h->value.p = line + v;
	h->value.len = e - v;
	return 0;
}

int bk_http_request_parse(const char *buf, size_t len, size_t max, bk_http_request *rq, int *status,
			  const char **why)
{
	size_t at = 0, line_len = 0;
	const char *sp1, *sp2, *line;
	int r;

	memset(rq, 0, sizeof(*rq));
	rq->content_length = -1;
	if (len > max)
		len = max;
	/* The method's bytes are known before its line ends: a TLS record or any other binary
	 * sent to the proxy is refused at once, not after the head's limit. */
	for (size_t i = 0; i < len && buf[i] != ' '; i++)
		if (!tchar((unsigned char)buf[i]) || i == BK_HTTP_METHOD_MAX)
			return fail(status, 400, why, "not an HTTP request (a method is 1-32 token bytes)");
	/* The request line. */
	r = next_line(buf, len, 0, &line_len);
	if (r < 0)
		return fail(status, 400, why, "a line ended by a bare CR or LF");
	if (r == 0)
		return len < max ? 0 : fail(status, 414, why, "a request line longer than the head's limit");
	line = buf;
	sp1 = memchr(line, ' ', line_len);
	sp2 = sp1 ? memchr(sp1 + 1, ' ', line_len - (size_t)(sp1 + 1 - line)) : NULL;
	if (!sp1 || !sp2 || memchr(sp2 + 1, ' ', line_len - (size_t)(sp2 + 1 - line)))
		return fail(status, 400, why, "a request line is METHOD SP TARGET SP VERSION");
	rq->method.p = line;
	rq->method.len = (size_t)(sp1 - line);
	if (rq->method.len == 0 || rq->method.len > BK_HTTP_METHOD_MAX)
		return fail(status, 400, why, "a method of 1-32 bytes");
	for (size_t i = 0; i < rq->method.len; i++)
		if (!tchar((unsigned char)line[i]))
			return fail(status, 400, why, "a method with a byte that is not a token's");
	bk_http_span target = { sp1 + 1, (size_t)(sp2 - sp1 - 1) };
	bk_http_span version = { sp2 + 1, line_len - (size_t)(sp2 + 1 - line) };
	if (target.len == 0)
		return fail(status, 400, why, "an empty request target");
	for (size_t i = 0; i < target.len; i++)
		if (!target_char((unsigned char)target.p[i]))
			return fail(status, 400, why, "a request target with a control, space or non-ASCII byte");
	if (span_is(version, "HTTP/1.1"))
		rq->minor = 1;
	else if (span_is(version, "HTTP/1.0"))
		rq->minor = 0;
	else if (version.len >= 5 && strncmp(version.p, "HTTP/", 5) == 0)
		return fail(status, 505, why, "an HTTP version other than 1.0 and 1.1 (HTTP/2 included)");
	else
		return fail(status, 400, why, "not an HTTP request line");
	/* Versions are case-sensitive: "http/1.1" is not one. */
	if (strncmp(version.p, "HTTP/", 5) != 0)
		return fail(status, 400, why, "not an HTTP request line");
	if ((r = parse_target(rq, target, status, why)) < 0)
		return r;
	at = line_len + 2;

	/* The header lines, to the empty one. */
	for (;;) {
		r = next_line(buf, len, at, &line_len);
		if (r < 0)
			return fail(status, 400, why, "a line ended by a bare CR or LF");
		if (r == 0)
			return len < max ? 0 : fail(status, 431, why, "a request head larger than the limit");
		if (line_len == 0)
			break;
		if (rq->n_headers == BK_HTTP_HEADERS_MAX)
			return fail(status, 431, why, "more than 100 header lines");
		bk_http_header *h = &rq->headers[rq->n_headers];
		if ((r = parse_header(buf + at, line_len, h, status, why)) < 0 ||
		    (r = header_semantics(rq, h, status, why)) < 0)
			return r;
		rq->n_headers++;
		at += line_len + 2;
	}
	rq->head_len = at + 2;

	/* What the framing and the form must agree on. */
	if (rq->chunked && rq->content_length >= 0)
		return fail(status, 400, why, "both Content-Length and Transfer-Encoding");
	if (rq->chunked && rq->minor == 0)
		return fail(status, 400, why, "Transfer-Encoding in an HTTP/1.0 request");
	if (rq->form == BK_HTTP_AUTHORITY && (rq->chunked || rq->content_length > 0))
		return fail(status, 400, why, "a CONNECT request with a body");
	if (rq->form == BK_HTTP_ORIGIN && !rq->host_header && rq->minor == 1)
		return fail(status, 400, why, "an HTTP/1.1 request without a Host header");
	return 1;
}

const bk_http_header *bk_http_header_find(const bk_http_request *rq, const char *name)
{
	for (size_t i = 0; i < rq->n_headers; i++)
		if (span_is(rq->headers[i].name, name))
			return &rq->headers[i];
	return NULL;
}

/* Whether the Connection header(s) list the name as an option (hop-by-hop). */
static bool connection_lists(const bk_http_request *rq, bk_http_span name)
{
	for (size_t i = 0; i < rq->n_headers; i++) {
		const bk_http_header *h = &rq->headers[i];
		if (!span_is(h->name, "connection"))
			continue;
		const char *p = h->value.p, *end = p + h->value.len;
		while (p < end) {
			const char *comma = memchr(p, ',', (size_t)(end - p)), *e = comma ? comma : end;
			while (p < e && (*p == ' ' || *p == '\t'))
				p++;
			const char *te = e;
			while (te > p && (te[-1] == ' ' || te[-1] == '\t'))
				te--;
			if ((size_t)(te - p) == name.len && strncasecmp(p, name.p, name.len) == 0)
				return true;
			p = comma ? comma + 1 : end;
		}
	}
	return false;
}

static bool dropped(const bk_http_request *rq, const bk_http_header *h, const char *const *strip, size_t n_strip)
{
	static const char *const hop[] = { "connection", "proxy-connection", "keep-alive", "proxy-authorization",
					   "te", "upgrade", "trailer" };

	for (size_t i = 0; i < sizeof(hop) / sizeof(hop[0]); i++)
		if (span_is(h->name, hop[i]))
			return true;
	for (size_t i = 0; i < n_strip; i++)
		if (span_is(h->name, strip[i]))
			return true;
	/* The names Connection lists go too, but Host is checked, never dropped. */
	return !span_is(h->name, "host") && connection_lists(rq, h->name);
}

struct out {
	char *p;
	size_t len, size;
	bool full;
};

static void put(struct out *o, const char *p, size_t n)
{
	if (n == 0)
		return;
	if (o->full || n > o->size - o->len) {
		o->full = true;
		return;
	}
	memcpy(o->p + o->len, p, n);
	o->len += n;
}

static void puts_lit(struct out *o, const char *s)
{
	put(o, s, strlen(s));
}

ssize_t bk_http_forward_head(const bk_http_request *rq, const char *const *strip, size_t n_strip, const char *add,
			     size_t add_len, char *out, size_t size)
{
	struct out o = { out, 0, size, false };

	put(&o, rq->method.p, rq->method.len);
	puts_lit(&o, " ");
	if (rq->path.len == 0 || rq->path.p[0] == '?')
		puts_lit(&o, "/");
	put(&o, rq->path.p, rq->path.len);
	puts_lit(&o, rq->minor ? " HTTP/1.1\r\n" : " HTTP/1.0\r\n");
	if (rq->form == BK_HTTP_ABSOLUTE && !rq->host_header) {
		char port[8];
		puts_lit(&o, "Host: ");
		put(&o, rq->host.p, rq->host.len);
		if (rq->port != 80) {
			snprintf(port, sizeof(port), ":%u", rq->port);
			puts_lit(&o, port);
		}
		puts_lit(&o, "\r\n");
	}
	for (size_t i = 0; i < rq->n_headers; i++) {
		const bk_http_header *h = &rq->headers[i];
		if (dropped(rq, h, strip, n_strip))
			continue;
		put(&o, h->name.p, h->name.len);
		puts_lit(&o, ": ");
		put(&o, h->value.p, h->value.len);
		puts_lit(&o, "\r\n");
	}
	put(&o, add, add_len);
	puts_lit(&o, "Connection: close\r\n\r\n");
	return o.full ? -ENOSPC : (ssize_t)o.len;
}

/* --- chunked --------------------------------------------------------------------------------- */

enum { CH_SIZE, CH_EXT, CH_SIZE_LF, CH_DATA, CH_DATA_CR, CH_DATA_LF, CH_TRAILER, CH_TRAILER_LF, CH_LAST_LF,
       CH_DONE };

#define CH_LINE_MAX 4096
#define CH_TRAILERS_MAX 16384
#define CH_SIZE_MAX ((uint64_t)1 << 60)

static int hexval(uint8_t c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int bk_http_chunked_feed(bk_http_chunked *c, const uint8_t *p, size_t n, size_t *used, const char **why)
{
	size_t i = 0;

	while (i < n) {
		uint8_t b = p[i];
		switch (c->state) {
		case CH_SIZE: {
			int h = hexval(b);
			if (h >= 0) {
				if (c->remaining >= CH_SIZE_MAX / 16) {
					*why = "a chunk larger than 2^60 bytes";
					return -EINVAL;
				}
				c->remaining = c->remaining * 16 + (uint64_t)h;
				if (++c->line > CH_LINE_MAX) {
					*why = "a chunk size line longer than 4 KiB";
					return -EINVAL;
				}
			} else if (c->line > 0 && b == ';') {
				c->state = CH_EXT;
			} else if (c->line > 0 && b == '\r') {
				c->state = CH_SIZE_LF;
			} else {
				*why = "a chunk size that is not hexadecimal";
				return -EINVAL;
			}
			break;
		}
		case CH_EXT:
			/* Extensions are passed on, not interpreted: visible bytes, space, tab. */
			if (b == '\r') {
				c->state = CH_SIZE_LF;
			} else if (!vchar(b)) {
				*why = "a control byte in a chunk extension";
				return -EINVAL;
			} else if (++c->line > CH_LINE_MAX) {
				*why = "a chunk size line longer than 4 KiB";
				return -EINVAL;
			}
			break;
		case CH_SIZE_LF:
			if (b != '\n') {
				*why = "a chunk size line not ended by CRLF";
				return -EINVAL;
			}
			c->line = 0;
			c->state = c->remaining ? CH_DATA : CH_TRAILER;
			break;
		case CH_DATA: {
			size_t take = n - i < c->remaining ? n - i : (size_t)c->remaining;
			c->remaining -= take;
			i += take;
			if (c->remaining == 0)
				c->state = CH_DATA_CR;
			continue;
		}
		case CH_DATA_CR:
			if (b != '\r') {
				*why = "a chunk's data not followed by CRLF";
				return -EINVAL;
			}
			c->state = CH_DATA_LF;
			break;
		case CH_DATA_LF:
			if (b != '\n') {
				*why = "a chunk's data not followed by CRLF";
				return -EINVAL;
			}
			c->state = CH_SIZE;
			break;
		case CH_TRAILER:
			/* A trailer line, or the empty line that ends the body. */
			if (b == '\r') {
				c->state = c->line ? CH_TRAILER_LF : CH_LAST_LF;
				break;
			}
			if (!vchar(b) || (c->line == 0 && (b == ' ' || b == '\t'))) {
				*why = "a malformed trailer line";
				return -EINVAL;
			}
			c->line++;
			if (++c->trailers > CH_TRAILERS_MAX) {
				*why = "trailers larger than 16 KiB";
				return -EINVAL;
			}
			break;
		case CH_TRAILER_LF:
			if (b != '\n') {
				*why = "a trailer line not ended by CRLF";
				return -EINVAL;
			}
			c->line = 0;
			c->state = CH_TRAILER;
			break;
		case CH_LAST_LF:
			if (b != '\n') {
				*why = "a chunked body not ended by CRLF";
				return -EINVAL;
			}
			c->state = CH_DONE;
			*used = i + 1;
			return 1;
		default:
			*why = "bytes after the end of a chunked body";
			return -EINVAL;
		}
		i++;
	}
	*used = n;
	return 0;
}

/* --- TLS ClientHello ------------------------------------------------------------------------- */

#define TLS_HELLO_MAX 16384

bool bk_tls_looks_like_hello(const uint8_t *buf, size_t len)
{
	return len >= 1 && buf[0] == 0x16 && (len < 2 || buf[1] == 0x03);
}

/* A cursor over the handshake message. */
struct cur {
	const uint8_t *p;
	size_t left;
};

static bool take(struct cur *c, size_t n, const uint8_t **out)
{
	if (c->left < n)
		return false;
	if (out)
		*out = c->p;
	c->p += n;
	c->left -= n;
	return true;
}

static bool take_u8(struct cur *c, size_t *v)
{
	const uint8_t *p;

	if (!take(c, 1, &p))
		return false;
	*v = p[0];
	return true;
}

static bool take_u16(struct cur *c, size_t *v)
{
	const uint8_t *p;

	if (!take(c, 2, &p))
		return false;
	*v = (size_t)p[0] << 8 | p[1];
	return true;
}

/* The server_name extension's body: its first host_name. */
static int sni_from_extension(struct cur e, char *name, size_t size)
{
	size_t list, type, len;
	const uint8_t *p;

	if (!take_u16(&e, &list) || list != e.left)
		return -EINVAL;
	while (e.left) {
		if (!take_u8(&e, &type) || !take_u16(&e, &len) || !take(&e, len, &p))
			return -EINVAL;
		if (type != 0)
			continue;
		if (len == 0 || len >= size || memchr(p, '\0', len))
			return -EINVAL;
		memcpy(name, p, len);
		name[len] = '\0';
		return 1;
	}
	return 0;
}

int bk_tls_hello_sni(const uint8_t *buf, size_t len, char *name, size_t size)
{
	uint8_t hs[TLS_HELLO_MAX + 4];
	size_t have = 0, at = 0, need = 0, v;

	/* The handshake message may span records: gather their payloads. */
	for (;;) {
		if (len - at < 5)
			return len - at > 0 && !bk_tls_looks_like_hello(buf + at, len - at) ? -EINVAL : -EAGAIN;
		size_t rlen = (size_t)buf[at + 3] << 8 | buf[at + 4];
		if (buf[at] != 0x16 || buf[at + 1] != 0x03 || rlen == 0 || rlen > 16384)
			return -EINVAL;
		if (len - at - 5 < rlen)
			return -EAGAIN;
		if (have + rlen > sizeof(hs))
			return -EINVAL;
		memcpy(hs + have, buf + at + 5, rlen);
		have += rlen;
		at += 5 + rlen;
		if (have >= 4) {
			if (hs[0] != 1) /* client_hello */
				return -EINVAL;
			need = 4 + ((size_t)hs[1] << 16 | (size_t)hs[2] << 8 | hs[3]);
			if (need > sizeof(hs))
				return -EINVAL;
			if (have >= need)
				break;
		}
	}
	struct cur c = { hs + 4, need - 4 }, exts;
	if (!take(&c, 2 + 32, NULL) ||                       /* version, random */
	    !take_u8(&c, &v) || v > 32 || !take(&c, v, NULL) || /* session id */
	    !take_u16(&c, &v) || v % 2 || v == 0 || !take(&c, v, NULL) || /* cipher suites */
	    !take_u8(&c, &v) || v == 0 || !take(&c, v, NULL))  /* compression methods */
		return -EINVAL;
	if (c.left == 0)
		return 0; /* no extensions at all */
	if (!take_u16(&c, &v) || v != c.left)
		return -EINVAL;
	exts = c;
	while (exts.left) {
		size_t type, elen;
		const uint8_t *p;
		if (!take_u16(&exts, &type) || !take_u16(&exts, &elen) || !take(&exts, elen, &p))
			return -EINVAL;
		if (type == 0)
			return sni_from_extension((struct cur){ p, elen }, name, size);
	}
	return 0;
}
