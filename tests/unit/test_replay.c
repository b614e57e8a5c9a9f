/* Unit tests of server/auth/replay.c, the replay cache. Time is the now_ms argument: each test drives
 * the cache through the moments it is about. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "auth/replay.h"

#define T0 1700000000000LL
#define WINDOW 1000

/* Distinct nonces: n in the first two bytes, the rest fixed. */
static void nonce_of(unsigned n, uint8_t nonce[BK_NONCE_LEN])
{
	memset(nonce, 0x3c, BK_NONCE_LEN);
	nonce[0] = (uint8_t)(n >> 8);
	nonce[1] = (uint8_t)n;
}

/* bk_replay_check for nonce n under key_id; an ANSWERED verdict's copy is freed. */
static bk_replay_verdict check(bk_replay *r, const char *key_id, unsigned n, int64_t now)
{
	uint8_t nonce[BK_NONCE_LEN], *answer = NULL;
	size_t answer_len = 0;
	bk_replay_verdict v;

	nonce_of(n, nonce);
	v = bk_replay_check(r, key_id, nonce, now, &answer, &answer_len);
	free(answer);
	return v;
}

static void answer(bk_replay *r, const char *key_id, unsigned n, size_t len)
{
	uint8_t nonce[BK_NONCE_LEN], *bytes = malloc(len ? len : 1);

	assert_non_null(bytes);
	memset(bytes, (int)n, len);
	nonce_of(n, nonce);
	bk_replay_answer(r, key_id, nonce, bytes, len);
	free(bytes);
}

static void fresh_then_in_flight_then_answered(void **state)
{
	static const uint8_t reply[] = "the answer, byte for byte";
	bk_replay *r = bk_replay_new(16, WINDOW, 1024);
	uint8_t nonce[BK_NONCE_LEN], *got = NULL;
	size_t got_len = 0;

	(void)state;
	assert_non_null(r);
	nonce_of(1, nonce);
	assert_int_equal(bk_replay_check(r, "k1", nonce, T0, &got, &got_len), BK_REPLAY_FRESH);
	assert_int_equal(bk_replay_count(r), 1);
	assert_int_equal(bk_replay_check(r, "k1", nonce, T0 + 1, &got, &got_len), BK_REPLAY_IN_FLIGHT);
	assert_null(got);

	bk_replay_answer(r, "k1", nonce, reply, sizeof(reply));
	assert_int_equal(bk_replay_answer_bytes(r), sizeof(reply));
	assert_int_equal(bk_replay_check(r, "k1", nonce, T0 + 2, &got, &got_len), BK_REPLAY_ANSWERED);
	assert_non_null(got);
	assert_int_equal(got_len, sizeof(reply));
	assert_memory_equal(got, reply, sizeof(reply));
	free(got);

	/* Every re-send gets its own copy of the same bytes. */
	got = NULL;
	assert_int_equal(bk_replay_check(r, "k1", nonce, T0 + 3, &got, &got_len), BK_REPLAY_ANSWERED);
	assert_memory_equal(got, reply, sizeof(reply));
	free(got);
	assert_int_equal(bk_replay_count(r), 1);
	bk_replay_free(r);
}

static void nonce_is_per_key(void **state)
{
	bk_replay *r = bk_replay_new(16, WINDOW, 1024);

	(void)state;
	assert_int_equal(check(r, "k1", 7, T0), BK_REPLAY_FRESH);
	assert_int_equal(check(r, "k2", 7, T0), BK_REPLAY_FRESH);
	assert_int_equal(check(r, "k1", 7, T0), BK_REPLAY_IN_FLIGHT);
	assert_int_equal(check(r, "k2", 7, T0), BK_REPLAY_IN_FLIGHT);
	/* A key id that is a prefix of another is still another key. */
	assert_int_equal(check(r, "k", 7, T0), BK_REPLAY_FRESH);
	assert_int_equal(bk_replay_count(r), 3);
	bk_replay_free(r);
}

static void full_cache_refuses_and_never_evicts(void **state)
{
	enum { CAPACITY = 100 };
	bk_replay *r = bk_replay_new(CAPACITY, WINDOW, 1 << 20);

	(void)state;
	for (unsigned n = 0; n < CAPACITY; n++)
		assert_int_equal(check(r, "k1", n, T0), BK_REPLAY_FRESH);
	answer(r, "k1", 0, 10);
	assert_int_equal(check(r, "k1", CAPACITY, T0), BK_REPLAY_FULL);
	assert_int_equal(check(r, "k2", 0, T0), BK_REPLAY_FULL);
	assert_int_equal(bk_replay_count(r), CAPACITY);
	/* The refused nonce was not recorded, and every live entry is still known. */
	assert_int_equal(check(r, "k1", CAPACITY, T0 + 1), BK_REPLAY_FULL);
	assert_int_equal(check(r, "k1", 0, T0 + 1), BK_REPLAY_ANSWERED);
	for (unsigned n = 1; n < CAPACITY; n++)
		assert_int_equal(check(r, "k1", n, T0 + 1), BK_REPLAY_IN_FLIGHT);
	/* Still full two rotations later, at the end of the entries' guaranteed lifetime: the
	 * oldest generation is not sacrificed to make room. */
	assert_int_equal(check(r, "k1", CAPACITY, T0 + WINDOW), BK_REPLAY_FULL);
	assert_int_equal(check(r, "k1", CAPACITY, T0 + 2 * WINDOW), BK_REPLAY_FULL);
	for (unsigned n = 1; n < CAPACITY; n++)
		assert_int_equal(check(r, "k1", n, T0 + 2 * WINDOW), BK_REPLAY_IN_FLIGHT);
	assert_int_equal(bk_replay_count(r), CAPACITY);
	bk_replay_free(r);
}

/* An entry inserted at the very end of a generation lives least; even it is remembered 2 windows
 * after insertion, and it is gone at the third rotation. */
static void entry_outlives_two_windows(void **state)
{
	bk_replay *r = bk_replay_new(16, WINDOW, 1024);
	const int64_t inserted = T0 + WINDOW - 1;

	(void)state;
	assert_int_equal(check(r, "k1", 1, T0), BK_REPLAY_FRESH); /* starts the first generation */
	assert_int_equal(check(r, "k1", 2, inserted), BK_REPLAY_FRESH);
	assert_int_equal(check(r, "k1", 2, T0 + WINDOW), BK_REPLAY_IN_FLIGHT);     /* rotation 1 */
	assert_int_equal(check(r, "k1", 2, T0 + 2 * WINDOW), BK_REPLAY_IN_FLIGHT); /* rotation 2 */
	assert_int_equal(check(r, "k1", 2, inserted + 2 * WINDOW), BK_REPLAY_IN_FLIGHT);
	assert_int_equal(check(r, "k1", 2, T0 + 3 * WINDOW), BK_REPLAY_FRESH); /* rotation 3 */
	bk_replay_free(r);
}

/* Rotations, not time, forget: with no traffic for a long while an entry is still remembered
 * until the third rotation after its generation began. */
static void forgotten_after_three_rotations(void **state)
{
	bk_replay *r = bk_replay_new(16, WINDOW, 1024);

	(void)state;
	assert_int_equal(check(r, "k1", 1, T0), BK_REPLAY_FRESH);
	answer(r, "k1", 1, 8);
	assert_int_equal(check(r, "k1", 9, T0 + 100 * WINDOW), BK_REPLAY_FRESH); /* rotation 1 */
	assert_int_equal(check(r, "k1", 1, T0 + 100 * WINDOW), BK_REPLAY_ANSWERED);
	assert_int_equal(check(r, "k1", 9, T0 + 200 * WINDOW), BK_REPLAY_IN_FLIGHT); /* rotation 2 */
	assert_int_equal(check(r, "k1", 1, T0 + 200 * WINDOW), BK_REPLAY_ANSWERED);
	assert_int_equal(bk_replay_count(r), 2);
	assert_int_equal(check(r, "k1", 8, T0 + 300 * WINDOW), BK_REPLAY_FRESH); /* rotation 3 */
	assert_int_equal(bk_replay_count(r), 2);                                  /* 9 and 8 */
	assert_int_equal(bk_replay_answer_bytes(r), 0); /* 1's answer went with it */
	assert_int_equal(check(r, "k1", 1, T0 + 300 * WINDOW), BK_REPLAY_FRESH);
	bk_replay_free(r);
}

/* The property the cache exists for, with the window check the server runs first: a request
 * accepted at any moment of a generation, carrying the timestamp furthest ahead that is still
 * accepted, is never FRESH again while that timestamp is inside the window. Probed every ms. */
static void no_replay_while_timestamp_in_window(void **state)
{
	static const int64_t phases[] = { 0, 1, WINDOW / 2, WINDOW - 1 };

	(void)state;
	for (size_t p = 0; p < BK_ARRAY_SIZE(phases); p++) {
		bk_replay *r = bk_replay_new(16, WINDOW, 1024);
		const int64_t accepted = T0 + phases[p];
		const int64_t ts = accepted + WINDOW;
		int64_t now;

		assert_int_equal(check(r, "k1", 1, T0), BK_REPLAY_FRESH); /* starts a generation at T0 */
		assert_int_equal(check(r, "k1", 2, accepted), BK_REPLAY_FRESH);
		for (now = accepted + 1;
		     bk_envelope_check_time(ts, now, WINDOW) == BOXKITE__V1__STATUS_DETAIL__STATUS_DETAIL_NONE; now++) {
			if (check(r, "k1", 2, now) == BK_REPLAY_FRESH)
				fail_msg("accepted at T0+%lld, timestamp T0+%lld: FRESH again at T0+%lld",
					 (long long)phases[p], (long long)(ts - T0), (long long)(now - T0));
		}
		assert_true(now - accepted > 2 * WINDOW); /* the loop did run to the window's end */
		bk_replay_free(r);
	}
}

static void oldest_answers_dropped_first(void **state)
{
	bk_replay *r = bk_replay_new(16, WINDOW, 100);

	(void)state;
	for (unsigned n = 1; n <= 3; n++)
		assert_int_equal(check(r, "k1", n, T0), BK_REPLAY_FRESH);
	answer(r, "k1", 1, 40);
	answer(r, "k1", 2, 40);
	assert_int_equal(bk_replay_answer_bytes(r), 80);
	answer(r, "k1", 3, 40); /* 120 > 100: request 1's answer goes */
	assert_int_equal(bk_replay_answer_bytes(r), 80);
	assert_int_equal(check(r, "k1", 1, T0 + 1), BK_REPLAY_REPLAYED);
	assert_int_equal(check(r, "k1", 2, T0 + 1), BK_REPLAY_ANSWERED);
	assert_int_equal(check(r, "k1", 3, T0 + 1), BK_REPLAY_ANSWERED);
	/* Request 1 is refused, not run again, for as long as the entry lives. */
	assert_int_equal(check(r, "k1", 1, T0 + 2 * WINDOW), BK_REPLAY_REPLAYED);
	bk_replay_free(r);
}

static void answer_over_the_cap_is_not_kept(void **state)
{
	bk_replay *r = bk_replay_new(16, WINDOW, 100);

	(void)state;
	for (unsigned n = 1; n <= 3; n++)
		assert_int_equal(check(r, "k1", n, T0), BK_REPLAY_FRESH);
	answer(r, "k1", 1, 60);
	answer(r, "k1", 2, 101);
	assert_int_equal(bk_replay_answer_bytes(r), 60); /* nothing dropped to make room for it */
	assert_int_equal(check(r, "k1", 2, T0 + 1), BK_REPLAY_REPLAYED);
	assert_int_equal(check(r, "k1", 1, T0 + 1), BK_REPLAY_ANSWERED);
	answer(r, "k1", 3, 100); /* exactly the cap: kept, after dropping 1's */
	assert_int_equal(bk_replay_answer_bytes(r), 100);
	assert_int_equal(check(r, "k1", 3, T0 + 1), BK_REPLAY_ANSWERED);
	assert_int_equal(check(r, "k1", 1, T0 + 1), BK_REPLAY_REPLAYED);
	bk_replay_free(r);
}

/* Only the first answer to a request is kept; answering an unknown request does nothing. */
static void answer_is_stored_once(void **state)
{
	bk_replay *r = bk_replay_new(16, WINDOW, 1024);
	uint8_t nonce[BK_NONCE_LEN], *got = NULL;
	size_t got_len = 0;

	(void)state;
	assert_int_equal(check(r, "k1", 1, T0), BK_REPLAY_FRESH);
	answer(r, "k1", 1, 10);
	answer(r, "k1", 1, 20);
	answer(r, "k1", 99, 30);
	assert_int_equal(bk_replay_answer_bytes(r), 10);
	assert_int_equal(bk_replay_count(r), 1);
	nonce_of(1, nonce);
	assert_int_equal(bk_replay_check(r, "k1", nonce, T0, &got, &got_len), BK_REPLAY_ANSWERED);
	assert_int_equal(got_len, 10);
	free(got);
	assert_int_equal(check(r, "k1", 99, T0), BK_REPLAY_FRESH);
	bk_replay_free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(fresh_then_in_flight_then_answered),
		cmocka_unit_test(nonce_is_per_key),
		cmocka_unit_test(full_cache_refuses_and_never_evicts),
		cmocka_unit_test(entry_outlives_two_windows),
		cmocka_unit_test(forgotten_after_three_rotations),
		cmocka_unit_test(no_replay_while_timestamp_in_window),
		cmocka_unit_test(oldest_answers_dropped_first),
		cmocka_unit_test(answer_over_the_cap_is_not_kept),
		cmocka_unit_test(answer_is_stored_once),
	};

	return cmocka_run_group_tests_name("replay", tests, NULL, NULL);
}
