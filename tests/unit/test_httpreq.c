/* Unit tests of server/transport/httpreq.c: a preview request's head is rewritten so that the
 * sandbox closes the connection after its answer (or tunnels an upgrade), what could be read two
 * ways is refused, and the body's framing ends the request exactly where it ends — whatever the
 * client sends after it is not this request's, fed in one piece or byte by byte. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "transport/httpreq.h"

static int parse(const char *head, bk_httpreq *rq, char *out, size_t size)
{
	size_t len = 0;
	int code = bk_httpreq_parse(head, strlen(head), rq, out, size - 1, &len);

	out[code ? 0 : len] = '\0';
	return code;
}

static void test_head_rewritten_to_close(void **state)
{
	char out[1024];
	bk_httpreq rq;

	(void)state;
	assert_int_equal(parse("GET /preview/3000/TOK/a/b?x=1 HTTP/1.1\r\nHost: h\r\nconnection: keep-alive\r\n"
			       "Keep-Alive: timeout=5\r\nProxy-Connection: keep-alive\r\nAccept: */*\r\n\r\n",
			       &rq, out, sizeof(out)),
			 0);
	assert_string_equal(out, "GET /a/b?x=1 HTTP/1.1\r\nHost: h\r\nAccept: */*\r\nConnection: close\r\n\r\n");
	assert_int_equal(rq.port, 3000);
	assert_string_equal(rq.token, "TOK");
	assert_false(rq.upgrade);
	assert_int_equal(rq.body, BK_HTTPREQ_NONE);
	assert_int_equal(parse("GET /preview/80/TOK HTTP/1.0\r\n\r\n", &rq, out, sizeof(out)), 0);
	assert_string_equal(out, "GET / HTTP/1.0\r\nConnection: close\r\n\r\n");
	assert_int_equal(parse("GET /preview/65535/TOK?q=1 HTTP/1.1\r\n\r\n", &rq, out, sizeof(out)), 0);
	assert_string_equal(out, "GET /?q=1 HTTP/1.1\r\nConnection: close\r\n\r\n");
}

static void test_upgrade_kept_only_when_connection_names_it(void **state)
{
	char out[1024];
	bk_httpreq rq;

	(void)state;
	assert_int_equal(parse("GET /preview/3000/T/ws HTTP/1.1\r\nUpgrade: websocket\r\nConnection: keep-alive, Upgrade\r\n"
			       "Sec-WebSocket-Key: k\r\n\r\n",
			       &rq, out, sizeof(out)),
			 0);
	assert_true(rq.upgrade);
	assert_string_equal(out, "GET /ws HTTP/1.1\r\nSec-WebSocket-Key: k\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n");
	/* An Upgrade the Connection header does not name is no upgrade: dropped, and closed. */
	assert_int_equal(parse("GET /preview/3000/T/ HTTP/1.1\r\nUpgrade: websocket\r\n\r\n", &rq, out, sizeof(out)), 0);
	assert_false(rq.upgrade);
	assert_string_equal(out, "GET / HTTP/1.1\r\nConnection: close\r\n\r\n");
}

static void test_what_two_readers_could_split_differently_is_refused(void **state)
{
	static const struct {
		const char *head;
		int code;
	} bad[] = {
		{ "GET /x/3000/T/ HTTP/1.1\r\n\r\n", 400 },
		{ "GET /preview/0/T/ HTTP/1.1\r\n\r\n", 400 },
		{ "GET /preview/65536/T/ HTTP/1.1\r\n\r\n", 400 },
		{ "GET /preview/03000/T/ HTTP/1.1\r\n\r\n", 400 },
		{ "GET /preview/3000// HTTP/1.1\r\n\r\n", 400 },
		{ "GET /preview/3000/T/ HTTP/2.0\r\n\r\n", 400 },
		{ "GET /preview/3000/T/ HTTP/1.10\r\n\r\n", 400 },
		{ "GET /preview/3000/T/\r\n\r\n", 400 },
		{ "GET /preview/3000/T/ HTTP/1.1\r\nA: b\r\n folded\r\n\r\n", 400 },
		{ "GET /preview/3000/T/ HTTP/1.1\r\nA: b\nB: c\r\n\r\n", 400 },
		{ "GET /preview/3000/T/ HTTP/1.1\r\nA: b\rB: c\r\n\r\n", 400 },
		{ "GET /preview/3000/T/ HTTP/1.1\r\nContent-Length : 5\r\n\r\n", 400 },
		{ "GET /preview/3000/T/ HTTP/1.1\r\nno colon\r\n\r\n", 400 },
		{ "POST /preview/3000/T/ HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n", 400 },
		{ "POST /preview/3000/T/ HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\n", 400 },
		{ "POST /preview/3000/T/ HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400 },
		{ "POST /preview/3000/T/ HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n", 400 },
		{ "POST /preview/3000/T/ HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", 400 },
		{ "POST /preview/3000/T/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 400 },
		{ "POST /preview/3000/T/ HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501 },
		{ "POST /preview/3000/T/ HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 501 },
		{ "GET /preview/3000/T/ HTTP/1.1\r\nUpgrade: a\r\nUpgrade: b\r\nConnection: upgrade\r\n\r\n", 400 },
		{ "GET /preview/3000/T.x/ HTTP/1.1\r\n\r\n", 400 },
		{ "GET /preview/3000/T/a\tb HTTP/1.1\r\n\r\n", 400 },
		{ "GET\t/preview/3000/T/ HTTP/1.1\r\n\r\n", 400 },
		{ "GET /preview/3000/T/\x7f HTTP/1.1\r\n\r\n", 400 },
	};
	char out[1024];
	bk_httpreq rq;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int code = parse(bad[i].head, &rq, out, sizeof(out));
		if (code != bad[i].code)
			fail_msg("%s: %d, not %d", bad[i].head, code, bad[i].code);
	}
}

static void test_content_length_ends_the_request(void **state)
{
	const char *rest = "helloGET /preview/3000/T/again HTTP/1.1\r\n\r\n";
	char out[1024];
	bk_httpreq rq;
	bool done;

	(void)state;
	assert_int_equal(parse("POST /preview/3000/T/ HTTP/1.1\r\nContent-Length: 5\r\n\r\n", &rq, out, sizeof(out)), 0);
	assert_int_equal(rq.body, BK_HTTPREQ_LENGTH);
	assert_int_equal(bk_httpreq_body(&rq, rest, 3, &done), 3);
	assert_false(done);
	assert_int_equal(bk_httpreq_body(&rq, rest + 3, strlen(rest) - 3, &done), 2);
	assert_true(done);
	/* Content-Length: 0 is no body. */
	assert_int_equal(parse("POST /preview/3000/T/ HTTP/1.1\r\nContent-Length: 0\r\n\r\n", &rq, out, sizeof(out)), 0);
	assert_int_equal(bk_httpreq_body(&rq, rest, strlen(rest), &done), 0);
	assert_true(done);
}

/* The chunked body's length, fed whole and byte by byte: -1 when malformed. */
static ssize_t chunked(const char *body, size_t len, bool bytewise)
{
	char out[1024];
	bk_httpreq rq;
	size_t total = 0;
	bool done = false;

	assert_int_equal(parse("POST /preview/3000/T/ HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n", &rq, out, sizeof(out)), 0);
	assert_int_equal(rq.body, BK_HTTPREQ_CHUNKED);
	for (size_t at = 0; at < len && !done;) {
		size_t feed = bytewise ? 1 : len - at;
		ssize_t n = bk_httpreq_body(&rq, body + at, feed, &done);
		if (n < 0)
			return -1;
		if (!done)
			assert_int_equal((size_t)n, feed);
		total += (size_t)n;
		at += (size_t)n;
	}
	return done ? (ssize_t)total : -2;
}

static void test_chunked_body_ends_where_its_last_chunk_does(void **state)
{
	static const char *const good[] = {
		"5\r\nhello\r\n0\r\n\r\n",
		"5;ext=1\r\nhello\r\nA \r\n0123456789\r\n0\r\n\r\n",
		"5\r\nhello\r\n0\r\nX-Trailer: yes\r\n\r\n",
		"0\r\n\r\n",
	};
	static const char *const bad[] = {
		"5\nhello\r\n0\r\n\r\n",        /* bare LF */
		"zz\r\n",                        /* no hex */
		"5\r\nhelloXX\r\n",              /* data longer than its size */
		"5\r\rhello\r\n0\r\n\r\n",       /* bare CR */
		"fffffffffffffffffff\r\n",       /* too large */
		"000000000000000000000000005\r\n", /* digits past what a size line may hold */
		"5x\r\nhello\r\n0\r\n\r\n",      /* not an extension */
	};
	const char *next = "GET /preview/3000/T/ HTTP/1.1\r\n\r\n";

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		char buf[256];
		snprintf(buf, sizeof(buf), "%s%s", good[i], next);
		for (int bytewise = 0; bytewise < 2; bytewise++) {
			ssize_t n = chunked(buf, strlen(buf), bytewise);
			if (n != (ssize_t)strlen(good[i]))
				fail_msg("%s (%s): %zd, not %zu", good[i], bytewise ? "byte by byte" : "whole", n, strlen(good[i]));
		}
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		for (int bytewise = 0; bytewise < 2; bytewise++)
			if (chunked(bad[i], strlen(bad[i]), bytewise) != -1)
				fail_msg("%s (%s) taken", bad[i], bytewise ? "byte by byte" : "whole");
}

static void test_switched(void **state)
{
	(void)state;
	assert_int_equal(bk_httpreq_switched("HTTP/1.1 101 Switching Protocols\r\n", 34), 1);
	assert_int_equal(bk_httpreq_switched("HTTP/1.1 200 OK\r\n", 17), 0);
	assert_int_equal(bk_httpreq_switched("HTTP/1.1 1010 x", 15), 0);
	assert_int_equal(bk_httpreq_switched("HTTP/1.1 10", 11), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_head_rewritten_to_close),
		cmocka_unit_test(test_upgrade_kept_only_when_connection_names_it),
		cmocka_unit_test(test_what_two_readers_could_split_differently_is_refused),
		cmocka_unit_test(test_content_length_ends_the_request),
		cmocka_unit_test(test_chunked_body_ends_where_its_last_chunk_does),
		cmocka_unit_test(test_switched),
	};
	return cmocka_run_group_tests_name("httpreq", tests, NULL, NULL);
}
