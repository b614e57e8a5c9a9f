/* Unit tests of common/preview.c: preview tokens verify only for their key, port and lifetime;
 * every byte of a token matters; the format is pinned by a vector computed independently (with
 * Python's hmac: key bytes 1..32, id k1, port 3000, expiry 2026-01-01T00:00:00Z). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "preview.h"
#include "support.h"

#define EXPIRY 1767225600 /* 2026-01-01T00:00:00Z */
#define VECTOR "AQu4AAAAAGlVuQACazEF-wl3Xl11tIJ4I6a511ONeB74rv4Nf5lJDpWhWTR-5Q"
#define HOUR 3600

/* A ring of keys k1 (secret 1..32) and k2 (secret 100..131). */
static bk_keyring *ring_of(uint8_t first1)
{
	char text[512];
	bk_keyring *ring = NULL;
	bk_error *err = NULL;
	int n = snprintf(text, sizeof(text), "k1 ");

	for (int i = 0; i < 32; i++)
		n += snprintf(text + n, sizeof(text) - (size_t)n, "%02x", (unsigned)(uint8_t)(first1 + i));
	n += snprintf(text + n, sizeof(text) - (size_t)n, "\nk2 ");
	for (int i = 0; i < 32; i++)
		n += snprintf(text + n, sizeof(text) - (size_t)n, "%02x", 100 + i);
	if (bk_keyring_parse(text, (size_t)n, "test", &ring, &err) < 0)
		fail_msg("%s", bk_error_msg(err));
	return ring;
}

static void test_vector(void **state)
{
	bk_keyring *ring = ring_of(1);
	char token[BK_PREVIEW_TOKEN_MAX];

	(void)state;
	assert_int_equal(bk_preview_token_make(&ring->keys[0], 3000, EXPIRY, token, sizeof(token)), 0);
	assert_string_equal(token, VECTOR);
	assert_int_equal(bk_preview_token_check(ring, VECTOR, 3000, EXPIRY - HOUR, 24 * HOUR, NULL), BK_PREVIEW_OK);
	/* The relay ends a connection at the expiry the token carries. */
	int64_t expires = 0;
	assert_int_equal(bk_preview_token_check(ring, VECTOR, 3000, EXPIRY - HOUR, 24 * HOUR, &expires), BK_PREVIEW_OK);
	assert_int_equal(expires, EXPIRY);
	bk_keyring_free(ring);
}

static void test_port_time_and_lifetime(void **state)
{
	bk_keyring *ring = ring_of(1);

	(void)state;
	assert_int_equal(bk_preview_token_check(ring, VECTOR, 3001, EXPIRY - HOUR, 24 * HOUR, NULL), BK_PREVIEW_WRONG_PORT);
	assert_int_equal(bk_preview_token_check(ring, VECTOR, 3000, EXPIRY, 24 * HOUR, NULL), BK_PREVIEW_EXPIRED);
	assert_int_equal(bk_preview_token_check(ring, VECTOR, 3000, EXPIRY + 1, 24 * HOUR, NULL), BK_PREVIEW_EXPIRED);
	assert_int_equal(bk_preview_token_check(ring, VECTOR, 3000, EXPIRY - 1, 24 * HOUR, NULL), BK_PREVIEW_OK);
	assert_int_equal(bk_preview_token_check(ring, VECTOR, 3000, EXPIRY - 2 * HOUR, HOUR, NULL), BK_PREVIEW_TOO_LONG);
	assert_int_equal(bk_preview_token_check(ring, VECTOR, 3000, EXPIRY - HOUR, HOUR, NULL), BK_PREVIEW_OK);
	bk_keyring_free(ring);
}

static void test_other_keys(void **state)
{
	bk_keyring *ring = ring_of(1), *other = ring_of(2); /* k1 differs, k2 the same */
	char token[BK_PREVIEW_TOKEN_MAX];

	(void)state;
	assert_int_equal(bk_preview_token_check(other, VECTOR, 3000, EXPIRY - HOUR, 24 * HOUR, NULL), BK_PREVIEW_BAD_MAC);
	assert_int_equal(bk_preview_token_make(&ring->keys[1], 3000, EXPIRY, token, sizeof(token)), 0);
	assert_int_equal(bk_preview_token_check(other, token, 3000, EXPIRY - HOUR, 24 * HOUR, NULL), BK_PREVIEW_OK);
	assert_int_equal(bk_preview_token_check(NULL, token, 3000, EXPIRY - HOUR, 24 * HOUR, NULL), BK_PREVIEW_UNKNOWN_KEY);
	bk_keyring_free(ring);
	bk_keyring_free(other);
}

/* Every character changed to every other: never OK. */
static void test_every_character_matters(void **state)
{
	static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	bk_keyring *ring = ring_of(1);
	char t[sizeof(VECTOR)];

	(void)state;
	for (size_t i = 0; i < sizeof(VECTOR) - 1; i++) {
		for (size_t a = 0; a < sizeof(alphabet) - 1; a++) {
			memcpy(t, VECTOR, sizeof(VECTOR));
			if (t[i] == alphabet[a])
				continue;
			t[i] = alphabet[a];
			if (bk_preview_token_check(ring, t, 3000, EXPIRY - HOUR, 24 * HOUR, NULL) == BK_PREVIEW_OK)
				fail_msg("token with character %zu changed to %c verified", i, alphabet[a]);
		}
	}
	bk_keyring_free(ring);
}

static void test_malformed(void **state)
{
	static const char *const bad[] = {
		"", "A", VECTOR "=", VECTOR "A", "AQu4AAAAAGlVuQACazEF+wl3Xl11tIJ4I6a511ONeB74rv4Nf5lJDpWhWTR-5Q",
		"AQu4AAAAAGlVuQACazEF-wl3Xl11tIJ4I6a511ONeB74rv4Nf5lJDpWhWTR-5", /* one character short */
		"AQu4AAAAAGlVuQACazEF-wl3Xl11tIJ4I6a511ONeB74rv4Nf5lJDpWhWTR-5R", /* trailing bits not zero */
		"Ag",
	};
	bk_keyring *ring = ring_of(1);

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		bk_preview_verdict v = bk_preview_token_check(ring, bad[i], 3000, EXPIRY - HOUR, 24 * HOUR, NULL);
		if (v != BK_PREVIEW_MALFORMED)
			fail_msg("'%s': %s, not MALFORMED", bad[i], bk_preview_verdict_name(v));
	}
	bk_keyring_free(ring);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_vector),          cmocka_unit_test(test_port_time_and_lifetime),
		cmocka_unit_test(test_other_keys),      cmocka_unit_test(test_every_character_matters),
		cmocka_unit_test(test_malformed),
	};
	return cmocka_run_group_tests_name("preview", tests, NULL, NULL);
}
