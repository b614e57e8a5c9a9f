/* Unit tests of egress/httpparse.c: the egress proxy's reading of what a sandboxed command sends it —
 * request heads (each of the ways two HTTP readers could disagree, refused), the head it sends
 * upstream, chunked framing, and a TLS ClientHello's server name. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "httpparse.h"

#define MAX 16384

static bk_http_request rq;

static void parsed(const char *head)
{
	int status = 0;
	const char *why = NULL;
	int r = bk_http_request_parse(head, strlen(head), MAX, &rq, &status, &why);

	if (r != 1)
		fail_msg("head %.60s... not parsed (%d): %d %s", head, r, status, why ? why : "");
	assert_int_equal(rq.head_len, strlen(head));
}

static void refused(const char *head, int want_status, const char *why_has)
{
	int status = 0;
	const char *why = NULL;
	int r = bk_http_request_parse(head, strlen(head), MAX, &rq, &status, &why);

	if (r != -EINVAL)
		fail_msg("head %.80s accepted (%d)", head, r);
	assert_int_equal(status, want_status);
	if (why_has && !strstr(why, why_has))
		fail_msg("head %.60s refused with '%s', not '%s'", head, why, why_has);
}

static bool span_eq(bk_http_span s, const char *want)
{
	return s.len == strlen(want) && memcmp(s.p, want, s.len) == 0;
}

static void test_connect(void **state)
{
	(void)state;
	parsed("CONNECT pkg.example:443 HTTP/1.1\r\nHost: pkg.example:443\r\n\r\n");
	assert_int_equal(rq.form, BK_HTTP_AUTHORITY);
	assert_true(span_eq(rq.host, "pkg.example"));
	assert_int_equal(rq.port, 443);
	assert_non_null(rq.host_header);
	assert_true(span_eq(rq.host_header->value, "pkg.example:443"));
	parsed("CONNECT [2001:db8::1]:443 HTTP/1.1\r\n\r\n");
	assert_true(span_eq(rq.host, "[2001:db8::1]"));
	parsed("CONNECT 127.1:22 HTTP/1.0\r\n\r\n");
	assert_int_equal(rq.minor, 0);
	refused("CONNECT pkg.example HTTP/1.1\r\n\r\n", 400, "port");
	refused("CONNECT pkg.example:0 HTTP/1.1\r\n\r\n", 400, "port");
	refused("CONNECT pkg.example:65536 HTTP/1.1\r\n\r\n", 400, "port");
	refused("CONNECT pkg.example:44x3 HTTP/1.1\r\n\r\n", 400, "port");
	refused("CONNECT user@pkg.example:443 HTTP/1.1\r\n\r\n", 400, "userinfo");
	refused("CONNECT 2001:db8::1:443 HTTP/1.1\r\n\r\n", 400, "brackets");
	refused("CONNECT [2001:db8::1]x:443 HTTP/1.1\r\n\r\n", 400, "after ]");
	refused("CONNECT [2001:db8::1 HTTP/1.1\r\n\r\n", 400, "unclosed");
	refused("CONNECT :443 HTTP/1.1\r\n\r\n", 400, "without a host");
	refused("CONNECT a:443 HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello", 400, "body");
	/* A zero-length body is no body. */
	parsed("CONNECT a:443 HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
}

static void test_absolute(void **state)
{
	(void)state;
	parsed("GET http://pkg.example/simple/x/?a=1 HTTP/1.1\r\nHost: pkg.example\r\nAccept: */*\r\n\r\n");
	assert_int_equal(rq.form, BK_HTTP_ABSOLUTE);
	assert_true(span_eq(rq.method, "GET"));
	assert_true(span_eq(rq.host, "pkg.example"));
	assert_int_equal(rq.port, 80);
	assert_true(span_eq(rq.path, "/simple/x/?a=1"));
	assert_int_equal(rq.n_headers, 2);
	parsed("GET HTTP://PKG.example:8080 HTTP/1.1\r\nHost: x\r\n\r\n");
	assert_int_equal(rq.port, 8080);
	assert_int_equal(rq.path.len, 0);
	parsed("GET http://a.example?q HTTP/1.1\r\nHost: a.example\r\n\r\n");
	assert_true(span_eq(rq.host, "a.example"));
	assert_true(span_eq(rq.path, "?q"));
	parsed("POST http://[2001:db8::1]:81/p HTTP/1.1\r\nContent-Length: 3\r\n\r\n");
	assert_int_equal(rq.content_length, 3);
	assert_null(rq.host_header);
	refused("GET https://pkg.example/ HTTP/1.1\r\n\r\n", 400, "CONNECT");
	refused("GET ftp://pkg.example/ HTTP/1.1\r\n\r\n", 400, "proxy");
	refused("GET http://user:pw@pkg.example/ HTTP/1.1\r\n\r\n", 400, "userinfo");
	refused("GET http://pkg.example@evil.example/ HTTP/1.1\r\n\r\n", 400, "userinfo");
	refused("GET http:///x HTTP/1.1\r\n\r\n", 400, "empty");
	refused("GET http://a.example:/x HTTP/1.1\r\n\r\n", 400, "port");
	refused("GET http://a.example/x#frag HTTP/1.1\r\n\r\n", 400, "fragment");
	refused("GET * HTTP/1.1\r\n\r\n", 400, "proxy");
}

static void test_origin(void **state)
{
	(void)state;
	parsed("GET /info/refs?service=git-upload-pack HTTP/1.1\r\nHost: git.example\r\n\r\n");
	assert_int_equal(rq.form, BK_HTTP_ORIGIN);
	assert_true(span_eq(rq.path, "/info/refs?service=git-upload-pack"));
	refused("GET / HTTP/1.1\r\n\r\n", 400, "Host");
	parsed("GET / HTTP/1.0\r\n\r\n");
}

static void test_request_line(void **state)
{
	(void)state;
	refused("GET  http://a/ HTTP/1.1\r\n\r\n", 400, "request line");
	refused("GET http://a/ HTTP/1.1 \r\n\r\n", 400, "request line");
	refused("GET\thttp://a/ HTTP/1.1\r\n\r\n", 400, NULL);
	refused("GET http://a/\x01 HTTP/1.1\r\n\r\n", 400, NULL);
	refused("GET http://a/\xc3\xa4 HTTP/1.1\r\n\r\n", 400, "non-ASCII");
	refused("G(T http://a/ HTTP/1.1\r\n\r\n", 400, "token");
	refused(" GET http://a/ HTTP/1.1\r\n\r\n", 400, NULL);
	refused("\r\nGET http://a/ HTTP/1.1\r\n\r\n", 400, NULL);
	refused("GET http://a/ HTTP/2.0\r\n\r\n", 505, "HTTP/2");
	refused("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505, "HTTP/2");
	refused("GET http://a/ HTTP/1.2\r\n\r\n", 505, NULL);
	refused("GET http://a/ http/1.1\r\n\r\n", 400, NULL);
	refused("GET http://a/ FOO\r\n\r\n", 400, NULL);
	/* TLS sent to the proxy as if it were a request: refused at its first byte. */
	int status;
	const char *why;
	assert_int_equal(bk_http_request_parse("\x16\x03\x01\x02\x00\x01", 6, MAX, &rq, &status, &why), -EINVAL);
	assert_int_equal(status, 400);
	assert_int_equal(bk_http_request_parse("\x16", 1, MAX, &rq, &status, &why), -EINVAL);
	char method[64];
	snprintf(method, sizeof(method), "%s http://a/ HTTP/1.1\r\n\r\n", "ABCDEFGHIJKLMNOPQRSTUVWXYZABCDEFG");
	refused(method, 400, "method");
}

static void test_headers_strict(void **state)
{
	(void)state;
	/* Line ends: CRLF only. */
	refused("GET http://a/ HTTP/1.1\nHost: a\r\n\r\n", 400, "bare");
	refused("GET http://a/ HTTP/1.1\r\nHost: a\n\r\n", 400, "bare");
	refused("GET http://a/ HTTP/1.1\r\nHost: a\r\n\n", 400, "bare");
	refused("GET http://a/ HTTP/1.1\r\nHost: a\rX: y\r\n\r\n", 400, "bare");
	/* Folding, space before the colon, no colon, empty name. */
	refused("GET http://a/ HTTP/1.1\r\nX: a\r\n b\r\n\r\n", 400, "folded");
	refused("GET http://a/ HTTP/1.1\r\nHost : a\r\n\r\n", 400, "before the colon");
	refused("GET http://a/ HTTP/1.1\r\nHost\r\n\r\n", 400, "colon");
	refused("GET http://a/ HTTP/1.1\r\n: a\r\n\r\n", 400, "colon");
	/* Control bytes in values; obs-text is fine. */
	refused("GET http://a/ HTTP/1.1\r\nX: a\x00b\r\n\r\n", 400, NULL);
	char nul[] = "GET http://a/ HTTP/1.1\r\nX: a?b\r\n\r\n";
	nul[29] = '\0';
	int status;
	const char *why;
	assert_int_equal(bk_http_request_parse(nul, sizeof(nul) - 1, MAX, &rq, &status, &why), -EINVAL);
	refused("GET http://a/ HTTP/1.1\r\nX: a\x7f\r\n\r\n", 400, "control");
	parsed("GET http://a/ HTTP/1.1\r\nX: caf\xc3\xa9\r\n\r\n");
	parsed("GET http://a/ HTTP/1.1\r\nX:   spaced\t \r\n\r\n");
	assert_true(span_eq(rq.headers[0].value, "spaced"));
	/* Two Host headers. */
	refused("GET http://a/ HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, "Host");
	assert_non_null(bk_http_header_find(&rq, "host"));
}

static void test_framing(void **state)
{
	(void)state;
	parsed("POST http://a/ HTTP/1.1\r\nContent-Length: 10\r\n\r\n");
	assert_int_equal(rq.content_length, 10);
	assert_false(rq.chunked);
	parsed("POST http://a/ HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n");
	assert_true(rq.chunked);
	assert_int_equal(rq.content_length, -1);
	/* The request-smuggling shapes. */
	refused("POST http://a/ HTTP/1.1\r\nContent-Length: 10\r\nTransfer-Encoding: chunked\r\n\r\n", 400, "both");
	refused("POST http://a/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 10\r\n\r\n", 400, "both");
	refused("POST http://a/ HTTP/1.1\r\nContent-Length: 10\r\nContent-Length: 10\r\n\r\n", 400, "two");
	refused("POST http://a/ HTTP/1.1\r\nContent-Length: 10, 10\r\n\r\n", 400, "decimal");
	refused("POST http://a/ HTTP/1.1\r\nContent-Length: +10\r\n\r\n", 400, "decimal");
	refused("POST http://a/ HTTP/1.1\r\nContent-Length: 0x10\r\n\r\n", 400, "decimal");
	refused("POST http://a/ HTTP/1.1\r\nContent-Length: \r\n\r\n", 400, "decimal");
	refused("POST http://a/ HTTP/1.1\r\nContent-Length: 1234567890123456789\r\n\r\n", 400, "decimal");
	refused("POST http://a/ HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501, "chunked");
	refused("POST http://a/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 400,
		"two");
	refused("POST http://a/ HTTP/1.1\r\nTransfer-Encoding: xchunked\r\n\r\n", 501, NULL);
	refused("POST http://a/ HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400, "1.0");
	parsed("GET http://a/ HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n");
	assert_true(rq.upgrade);
}

static void test_limits(void **state)
{
	char head[MAX + 64];
	int status;
	const char *why;
	size_t n;

	(void)state;
	/* Incomplete heads want more, until the limit. */
	assert_int_equal(bk_http_request_parse("GET http://a/ HTTP/1.1\r\nHost: a\r\n", 32, MAX, &rq, &status, &why), 0);
	assert_int_equal(bk_http_request_parse("GET http://a/ HTTP/1.1\r", 23, MAX, &rq, &status, &why), 0);
	assert_int_equal(bk_http_request_parse("GET http://a/", 13, MAX, &rq, &status, &why), 0);
	n = (size_t)snprintf(head, sizeof(head), "GET http://a/ HTTP/1.1\r\nX: ");
	memset(head + n, 'a', sizeof(head) - n);
	assert_int_equal(bk_http_request_parse(head, 1000, MAX, &rq, &status, &why), 0);
	assert_int_equal(bk_http_request_parse(head, sizeof(head), MAX, &rq, &status, &why), -EINVAL);
	assert_int_equal(status, 431);
	memset(head, 'a', sizeof(head));
	memcpy(head, "GET /", 5);
	assert_int_equal(bk_http_request_parse(head, sizeof(head), MAX, &rq, &status, &why), -EINVAL);
	assert_int_equal(status, 414);
	/* 100 header lines are fine, 101 are not. */
	n = (size_t)snprintf(head, sizeof(head), "GET http://a/ HTTP/1.1\r\n");
	for (int i = 0; i < 100; i++)
		n += (size_t)snprintf(head + n, sizeof(head) - n, "X-%d: y\r\n", i);
	snprintf(head + n, sizeof(head) - n, "\r\n");
	parsed(head);
	snprintf(head + n, sizeof(head) - n, "Z: z\r\n\r\n");
	refused(head, 431, "100");
}

static void test_authority_split(void **state)
{
	bk_http_span h;
	uint16_t port;
	const char *why;

	(void)state;
	assert_int_equal(bk_http_authority_split((bk_http_span){ "a.example", 9 }, 80, &h, &port, &why), 0);
	assert_int_equal(port, 80);
	assert_int_equal(bk_http_authority_split((bk_http_span){ "a.example:8080", 14 }, 80, &h, &port, &why), 0);
	assert_int_equal(port, 8080);
	assert_true(span_eq(h, "a.example"));
	assert_int_equal(bk_http_authority_split((bk_http_span){ "[::1]", 5 }, 443, &h, &port, &why), 0);
	assert_true(span_eq(h, "[::1]"));
	assert_int_equal(port, 443);
	assert_int_equal(bk_http_authority_split((bk_http_span){ "a.example", 9 }, 0, &h, &port, &why), -EINVAL);
	assert_int_equal(bk_http_authority_split((bk_http_span){ "", 0 }, 80, &h, &port, &why), -EINVAL);
}

static void forwarded(const char *head, const char *const *strip, size_t n_strip, const char *add, const char *want)
{
	char out[4096];
	ssize_t n;

	parsed(head);
	n = bk_http_forward_head(&rq, strip, n_strip, add, add ? strlen(add) : 0, out, sizeof(out));
	assert_true(n > 0);
	out[n] = '\0';
	assert_string_equal(out, want);
	/* Too small a buffer is an error, never a cut head. */
	assert_int_equal(bk_http_forward_head(&rq, strip, n_strip, add, add ? strlen(add) : 0, out, (size_t)n - 1),
			 -ENOSPC);
}

static void test_forward_head(void **state)
{
	static const char *const strip[] = { "Authorization", "x-api-key" };

	(void)state;
	forwarded("GET http://a.example/p?q=1 HTTP/1.1\r\nHost: a.example\r\nAccept: */*\r\n"
		  "Proxy-Connection: keep-alive\r\nProxy-Authorization: Basic eA==\r\nConnection: keep-alive, X-Hop\r\n"
		  "X-Hop: 1\r\nKeep-Alive: 5\r\nTE: trailers\r\n\r\n",
		  NULL, 0, NULL, "GET /p?q=1 HTTP/1.1\r\nHost: a.example\r\nAccept: */*\r\nConnection: close\r\n\r\n");
	forwarded("GET http://a.example:8080 HTTP/1.1\r\n\r\n", NULL, 0, NULL,
		  "GET / HTTP/1.1\r\nHost: a.example:8080\r\nConnection: close\r\n\r\n");
	forwarded("GET http://a.example?x HTTP/1.0\r\n\r\n", NULL, 0, NULL,
		  "GET /?x HTTP/1.0\r\nHost: a.example\r\nConnection: close\r\n\r\n");
	/* Credentials: the command's own headers of those names go, the operator's come. */
	forwarded("POST http://a.example/ HTTP/1.1\r\nHost: a.example\r\nauthorization: Bearer forged\r\n"
		  "X-API-Key: forged\r\nContent-Length: 2\r\n\r\n",
		  strip, 2, "Authorization: Bearer real\r\n",
		  "POST / HTTP/1.1\r\nHost: a.example\r\nContent-Length: 2\r\nAuthorization: Bearer real\r\n"
		  "Connection: close\r\n\r\n");
	/* Connection may not drop Host. */
	forwarded("GET /x HTTP/1.1\r\nHost: a.example\r\nConnection: host\r\n\r\n", NULL, 0, NULL,
		  "GET /x HTTP/1.1\r\nHost: a.example\r\nConnection: close\r\n\r\n");
}

static int feed_all(const char *body, size_t *used)
{
	bk_http_chunked c = { 0 };
	const char *why = NULL;

	return bk_http_chunked_feed(&c, (const uint8_t *)body, strlen(body), used, &why);
}

static void test_chunked(void **state)
{
	static const char body[] = "5\r\nhello\r\n1A;ext=1\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nX-T: 1\r\n\r\nNEXT";
	size_t used = 0;

	(void)state;
	assert_int_equal(feed_all(body, &used), 1);
	assert_int_equal(used, strlen(body) - 4);
	/* Byte by byte, the same. */
	bk_http_chunked c = { 0 };
	const char *why = NULL;
	size_t total = 0;
	int r = 0;
	for (size_t i = 0; i < strlen(body) && r == 0; i++) {
		r = bk_http_chunked_feed(&c, (const uint8_t *)body + i, 1, &used, &why);
		total += used;
	}
	assert_int_equal(r, 1);
	assert_int_equal(total, strlen(body) - 4);
	assert_int_equal(feed_all("0\r\n\r\n", &used), 1);
	assert_int_equal(feed_all("5\r\nhel", &used), 0);
	assert_int_equal(used, 6);
	/* Malformed framing. */
	assert_int_equal(feed_all("5\nhello\r\n0\r\n\r\n", &used), -EINVAL);
	assert_int_equal(feed_all("5\r\nhelloX\r\n0\r\n\r\n", &used), -EINVAL);
	assert_int_equal(feed_all("g\r\n", &used), -EINVAL);
	assert_int_equal(feed_all("\r\n", &used), -EINVAL);
	assert_int_equal(feed_all(" 5\r\nhello\r\n", &used), -EINVAL);
	assert_int_equal(feed_all("-5\r\n", &used), -EINVAL);
	assert_int_equal(feed_all("fffffffffffffffff\r\n", &used), -EINVAL);
	assert_int_equal(feed_all("5;a\x01\r\n", &used), -EINVAL);
	assert_int_equal(feed_all("0\r\n folded\r\n\r\n", &used), -EINVAL);
	assert_int_equal(feed_all("0\r\n\r\r", &used), -EINVAL);
	char big[20000];
	memset(big, '0', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(feed_all(big, &used), -EINVAL);
	memcpy(big, "0\r\nX: ", 6);
	memset(big + 6, 'a', sizeof(big) - 7);
	assert_int_equal(feed_all(big, &used), -EINVAL);
}

/* A ClientHello with the given server name (NULL: no extension at all). */
static size_t hello(uint8_t *out, const char *sni, size_t split)
{
	uint8_t body[512];
	size_t n = 0;

	body[n++] = 3;
	body[n++] = 3;
	memset(body + n, 0x42, 32);
	n += 32;
	body[n++] = 0;            /* session id */
	body[n++] = 0;
	body[n++] = 2;            /* one cipher suite */
	body[n++] = 0x13;
	body[n++] = 0x01;
	body[n++] = 1;            /* compression: null */
	body[n++] = 0;
	if (sni) {
		size_t l = strlen(sni), ext = 2 + 1 + 2 + l;
		body[n++] = 0;
		body[n++] = (uint8_t)(4 + ext + 4); /* extensions length */
		body[n++] = 0x00;                   /* a padding-like extension first */
		body[n++] = 0x15;
		body[n++] = 0;
		body[n++] = 0;
		body[n++] = 0;                      /* server_name */
		body[n++] = 0;
		body[n++] = 0;
		body[n++] = (uint8_t)ext;
		body[n++] = 0;
		body[n++] = (uint8_t)(ext - 2);
		body[n++] = 0;                      /* host_name */
		body[n++] = 0;
		body[n++] = (uint8_t)l;
		memcpy(body + n, sni, l);
		n += l;
	}
	uint8_t hs[600];
	hs[0] = 1;
	hs[1] = 0;
	hs[2] = (uint8_t)(n >> 8);
	hs[3] = (uint8_t)n;
	memcpy(hs + 4, body, n);
	size_t total = n + 4, at = 0, o = 0;
	if (!split)
		split = total;
	while (at < total) {
		size_t r = total - at < split ? total - at : split;
		out[o++] = 0x16;
		out[o++] = 0x03;
		out[o++] = 0x01;
		out[o++] = (uint8_t)(r >> 8);
		out[o++] = (uint8_t)r;
		memcpy(out + o, hs + at, r);
		o += r;
		at += r;
	}
	return o;
}

static void test_tls_sni(void **state)
{
	uint8_t buf[1024];
	char name[256];
	size_t n;

	(void)state;
	n = hello(buf, "pkg.example", 0);
	assert_true(bk_tls_looks_like_hello(buf, n));
	assert_int_equal(bk_tls_hello_sni(buf, n, name, sizeof(name)), 1);
	assert_string_equal(name, "pkg.example");
	/* Every cut short of the whole wants more. */
	for (size_t cut = 0; cut < n; cut++)
		assert_int_equal(bk_tls_hello_sni(buf, cut, name, sizeof(name)), -EAGAIN);
	/* Split across records. */
	n = hello(buf, "other.example", 7);
	assert_int_equal(bk_tls_hello_sni(buf, n, name, sizeof(name)), 1);
	assert_string_equal(name, "other.example");
	n = hello(buf, NULL, 0);
	assert_int_equal(bk_tls_hello_sni(buf, n, name, sizeof(name)), 0);
	/* Not TLS, not a ClientHello, a name that does not fit. */
	assert_int_equal(bk_tls_hello_sni((const uint8_t *)"GET / HTTP/1.1\r\n", 16, name, sizeof(name)), -EINVAL);
	assert_false(bk_tls_looks_like_hello((const uint8_t *)"GET", 3));
	n = hello(buf, "pkg.example", 0);
	buf[5] = 2; /* server_hello */
	assert_int_equal(bk_tls_hello_sni(buf, n, name, sizeof(name)), -EINVAL);
	n = hello(buf, "pkg.example", 0);
	assert_int_equal(bk_tls_hello_sni(buf, n, name, 5), -EINVAL);
	n = hello(buf, "pkg.example", 0);
	buf[3] = 0x41; /* a record longer than 16 KiB */
	assert_int_equal(bk_tls_hello_sni(buf, n, name, sizeof(name)), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_connect),	      cmocka_unit_test(test_absolute),
		cmocka_unit_test(test_origin),	      cmocka_unit_test(test_request_line),
		cmocka_unit_test(test_headers_strict), cmocka_unit_test(test_framing),
		cmocka_unit_test(test_limits),	      cmocka_unit_test(test_authority_split),
		cmocka_unit_test(test_forward_head),   cmocka_unit_test(test_chunked),
		cmocka_unit_test(test_tls_sni),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
