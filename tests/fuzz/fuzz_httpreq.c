/* fuzz_httpreq: what a browser (or anyone who reaches --preview-listen) sends, through the
 * preview relay's framing of one request (server/transport/httpreq.c): the head up to its blank
 * line as the door hands it over, then whatever came after it.
 *
 * Oracles beside the sanitizers: a head that is taken is rewritten to one that ends in
 * "Connection: close" (or, for an upgrade, "Connection: Upgrade") and a blank line, holds no bare
 * CR or LF, is no longer than the head plus 64 bytes, and has a request line shorter than the
 * one received by the preview's part at least; its port is 1-65535 and its token non-empty. The body's framing says the same
 * whether the bytes after the head come whole or one at a time (how many are the body's, whether
 * it ended), and never claims more bytes than it was given.
 *
 * Built for libFuzzer (make fuzz FUZZ_TARGET=httpreq), or linked with replay.c (make test-fuzz). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/httpreq.h"

#define OUT_SLACK 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "fuzz_httpreq: %s\n", what);
		abort();
	}
}

/* The body's framing fed len bytes in one call or one byte at a time: consumed and done. */
static ssize_t body(bk_httpreq rq, const char *buf, size_t len, bool bytewise, bool *done)
{
	size_t total = 0;

	*done = false;
	if (!bytewise)
		return bk_httpreq_body(&rq, buf, len, done);
	for (size_t i = 0; i < len && !*done; i++) {
		ssize_t n = bk_httpreq_body(&rq, buf + i, 1, done);
		if (n < 0)
			return -1;
		total += (size_t)n;
		if (!*done)
			check(n == 1, "a byte of a body not yet ended was not taken");
	}
	if (!len)
		return bk_httpreq_body(&rq, buf, 0, done);
	return (ssize_t)total;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *in = (const char *)data, *end = memmem(in, size, "\r\n\r\n", 4);
	size_t head_len = end ? (size_t)(end - in) + 4 : size, out_len = 0;
	char *out = malloc(head_len + OUT_SLACK);
	bk_httpreq rq;
	int code;

	if (!out)
		return 0;
	code = bk_httpreq_parse(in, head_len, &rq, out, head_len + OUT_SLACK, &out_len);
	if (code) {
		check(code == 400 || code == 501, "a refusal other than 400 or 501");
		free(out);
		return 0;
	}
	check(end != NULL, "a head without its blank line was taken");
	check(out_len <= head_len + OUT_SLACK && out_len >= 4 && memcmp(out + out_len - 4, "\r\n\r\n", 4) == 0,
	      "the rewritten head does not end in a blank line");
	check(rq.port >= 1 && rq.port <= 65535 && rq.token[0], "a port or token out of range");
	const char *tail = rq.upgrade ? "Connection: Upgrade\r\n\r\n" : "Connection: close\r\n\r\n";
	check(out_len >= strlen(tail) && memcmp(out + out_len - strlen(tail), tail, strlen(tail)) == 0,
	      "the rewritten head does not end the connection");
	/* The target is what followed the token: the head's own, shorter by the preview's part. */
	const char *sp = memchr(out, ' ', out_len), *line_end = memmem(in, head_len, "\r\n", 2);
	const char *out_line_end = memmem(out, out_len, "\r\n", 2);
	check(sp && sp[1] == '/' && out_line_end && line_end && out_line_end - out + 9 < line_end - in,
	      "the target was not rewritten");
	for (size_t i = 0; i < out_len; i++) {
		if (out[i] == '\r')
			check(i + 1 < out_len && out[i + 1] == '\n', "a bare CR in the rewritten head");
		if (out[i] == '\n')
			check(i > 0 && out[i - 1] == '\r', "a bare LF in the rewritten head");
	}
	bool done_whole, done_bytes;
	ssize_t whole = body(rq, in + head_len, size - head_len, false, &done_whole);
	ssize_t bytes = body(rq, in + head_len, size - head_len, true, &done_bytes);
	check(whole <= (ssize_t)(size - head_len), "the body claims more bytes than were given");
	check(whole == bytes && (whole < 0 || done_whole == done_bytes),
	      "the body's framing depends on how its bytes arrive");
	bk_httpreq_switched(in + head_len, size - head_len);
	free(out);
	return 0;
}
