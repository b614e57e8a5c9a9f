/* fuzz_httpparse: what a sandboxed command sends the egress proxy, through the readers that see it
 * first (egress/httpparse.c) and the policy's reading of the host it names
 * (common/egresspolicy.c).
 *
 * An input is one selector byte, then the bytes:
 *   0  a request head (the proxy's limit, 16 KiB), then, when it parses, the head the proxy
 *      would send upstream for it, and the rest of the input as a chunked body
 *   1  a chunked body, fed whole and byte by byte
 *   2  a TLS ClientHello's server name, whole and in every prefix
 *   3  a host as a request names it, and the same bytes as a pattern
 *
 * Oracles beside the sanitizers: a parsed head lies within the input, ends in its empty line,
 * has a token method and header names, values without CR, LF or NUL, and one framing at most;
 * the head sent upstream parses again (origin form, the same method and path, Connection: close,
 * none of the dropped headers); a chunked body is read the same however it is cut; a ClientHello
 * prefix asks for more or is refused, never answers something else; a normalized host has no
 * upper case, no trailing dot, and parses back to itself.
 *
 * Blind spots: the proxy's sockets, threads and TLS (tests/integration/test_egress_proxy.py). */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "egresspolicy.h"
#include "httpparse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define HEAD_MAX 16384

__attribute__((noreturn)) static void die(const char *what)
{
	fprintf(stderr, "fuzz_httpparse: %s\n", what);
	abort();
}

static bool within(bk_http_span s, const char *buf, size_t len)
{
	return s.len == 0 || (s.p >= buf && s.p + s.len <= buf + len);
}

static bool clean_value(bk_http_span s)
{
	for (size_t i = 0; i < s.len; i++)
		if (s.p[i] == '\r' || s.p[i] == '\n' || s.p[i] == '\0')
			return false;
	return true;
}

static void chunked(const uint8_t *p, size_t n)
{
	bk_http_chunked whole = { 0 }, step = { 0 };
	const char *why = NULL;
	size_t used = 0, total = 0;
	int a = bk_http_chunked_feed(&whole, p, n, &used, &why), b = 0;

	if (a < 0 && !why)
		die("a chunked refusal without a reason");
	for (size_t i = 0; i < n && b == 0; i++) {
		size_t u = 0;
		b = bk_http_chunked_feed(&step, p + i, 1, &u, &why);
		if (b >= 0)
			total += u;
	}
	if (a != b || (a >= 0 && used != total))
		die("a chunked body read differently when cut byte by byte");
}

static void request(const char *buf, size_t len)
{
	static const char *const strip[] = { "authorization" };
	static const char add[] = "Authorization: Bearer x\r\n";
	bk_http_request rq, again;
	char out[HEAD_MAX + 4096];
	int status = 0;
	const char *why = NULL;
	int r = bk_http_request_parse(buf, len, HEAD_MAX, &rq, &status, &why);

	if (r < 0 && (!why || status < 400 || status > 505))
		die("a refusal without a reason or a status");
	if (r != 1)
		return;
	if (rq.head_len > len || rq.head_len < 4 || memcmp(buf + rq.head_len - 4, "\r\n\r\n", 4) != 0)
		die("a head that does not end in its empty line");
	if (!within(rq.method, buf, len) || !within(rq.host, buf, len) || !within(rq.path, buf, len))
		die("a span outside the input");
	if (rq.chunked && rq.content_length >= 0)
		die("two framings");
	for (size_t i = 0; i < rq.n_headers; i++) {
		if (!within(rq.headers[i].name, buf, len) || !within(rq.headers[i].value, buf, len) ||
		    rq.headers[i].name.len == 0 || !clean_value(rq.headers[i].value) || !clean_value(rq.headers[i].name))
			die("a header that is not clean");
	}
	if (rq.form == BK_HTTP_AUTHORITY) {
		bk_egress_host h;
		bk_egress_host_parse(rq.host.p, rq.host.len, &h, NULL);
		return;
	}
	ssize_t n = bk_http_forward_head(&rq, strip, 1, add, sizeof(add) - 1, out, sizeof(out));
	/* Host, the credential and Connection may come on top: past the header limit the head sent
	 * is still what the upstream gets, but not what this parser would take. */
	if (n < 0 || rq.n_headers > BK_HTTP_HEADERS_MAX - 3)
		return;
	if (bk_http_request_parse(out, (size_t)n, sizeof(out), &again, &status, &why) != 1)
		die("the head sent upstream does not parse");
	if (again.form != BK_HTTP_ORIGIN || again.method.len != rq.method.len ||
	    memcmp(again.method.p, rq.method.p, rq.method.len) != 0)
		die("the head sent upstream changed its method or form");
	const bk_http_header *conn = bk_http_header_find(&again, "connection");
	if (!conn || conn->value.len != 5 || strncasecmp(conn->value.p, "close", 5) != 0)
		die("the head sent upstream does not close");
	size_t auths = 0;
	for (size_t i = 0; i < again.n_headers; i++) {
		bk_http_span nm = again.headers[i].name;
		if (nm.len == 13 && strncasecmp(nm.p, "authorization", 13) == 0)
			auths++;
		if ((nm.len == 19 && strncasecmp(nm.p, "proxy-authorization", 19) == 0) ||
		    (nm.len == 7 && strncasecmp(nm.p, "upgrade", 7) == 0))
			die("a hop-by-hop header went upstream");
	}
	if (auths != 1)
		die("the credential is not there exactly once");
	if (rq.chunked)
		chunked((const uint8_t *)buf + rq.head_len, len - rq.head_len);
}

static void hello(const uint8_t *p, size_t n)
{
	char name[256], part[256];
	int whole = bk_tls_hello_sni(p, n, name, sizeof(name));

	if (whole == 1 && strlen(name) == 0)
		die("an empty server name");
	for (size_t cut = 0; cut < n && cut < 512; cut++) {
		int r = bk_tls_hello_sni(p, cut, part, sizeof(part));
		if (r != -EAGAIN && (r != whole || (r == 1 && strcmp(part, name) != 0)))
			die("a prefix of a ClientHello answered something else than the whole");
	}
}

static void host(const char *p, size_t n)
{
	bk_egress_host h, h2;
	bk_egress_pattern pat;
	char text[BK_EGRESS_PATTERN_TEXT_MAX + 1];

	if (bk_egress_host_parse(p, n, &h, NULL) == 0 && !h.is_addr) {
		size_t len = strlen(h.name);
		for (size_t i = 0; i < len; i++)
			if (h.name[i] >= 'A' && h.name[i] <= 'Z')
				die("upper case in a normalized name");
		if (!len || h.name[len - 1] == '.')
			die("a normalized name with a trailing dot");
		if (bk_egress_host_parse(h.name, len, &h2, NULL) < 0 || h2.is_addr || strcmp(h.name, h2.name) != 0)
			die("a normalized name does not parse back to itself");
	}
	if (n < sizeof(text)) {
		memcpy(text, p, n);
		text[n] = '\0';
		if (bk_egress_pattern_parse(text, &pat, NULL) == 0) {
			bk_egress_pattern back;
			bk_egress_pattern_format(&pat, text, sizeof(text));
			if (bk_egress_pattern_parse(text, &back, NULL) < 0 || memcmp(&back, &pat, sizeof(pat)) != 0)
				die("a pattern's canonical text is another pattern");
			if (!bk_egress_pattern_covers(&pat, &pat))
				die("a pattern does not cover itself");
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	const uint8_t *p = data + 1;
	size_t n = size - 1;

	switch (data[0] & 3) {
	case 0:
		request((const char *)p, n);
		break;
	case 1:
		chunked(p, n);
		break;
	case 2:
		hello(p, n);
		break;
	default:
		host((const char *)p, n);
		break;
	}
	return 0;
}
