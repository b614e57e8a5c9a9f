/* Unit tests of common/contenthash.c: the content hash is the SHA-256 of the blocks' SHA-256s,
 * computed alike whatever the pieces a content arrives in (whole blocks with their hash given,
 * or any other sizes), and never final before all of it is in. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <errno.h>
#include <openssl/evp.h>

#include "contenthash.h"
#include "support.h"

#define B BK_BLOCK_SIZE

static uint8_t *content(size_t n)
{
	uint8_t *p = malloc(n ? n : 1);

	assert_non_null(p);
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 31 + (i >> 12));
	return p;
}

static void sha256(const uint8_t *p, size_t n, bk_hash out)
{
	assert_true(EVP_Digest(n ? p : (const uint8_t *)"", n, out, NULL, EVP_sha256(), NULL));
}

/* The definition, spelled out: SHA-256 over the concatenated block hashes. */
static void reference(const uint8_t *p, size_t n, bk_hash out)
{
	size_t blocks = n / B + (n % B != 0);
	uint8_t *cat = malloc(blocks * BK_HASH_LEN + 1);

	assert_non_null(cat);
	for (size_t k = 0; k < blocks; k++)
		sha256(p + k * B, n - k * B < B ? n - k * B : B, cat + k * BK_HASH_LEN);
	sha256(cat, blocks * BK_HASH_LEN, out);
	free(cat);
}

/* Add p[0..n) to b in pieces of `piece` bytes, giving the hash of whole blocks when asked. */
static void add_in_pieces(bk_blockhash *b, const uint8_t *p, size_t n, size_t piece, bool give_hashes)
{
	for (size_t off = 0; off < n;) {
		size_t len = n - off < piece ? n - off : piece;
		bk_hash h;

		if (give_hashes && bk_blockhash_whole(b, len)) {
			sha256(p + off, len, h);
			assert_int_equal(bk_blockhash_add(b, p + off, len, h), 0);
		} else {
			assert_int_equal(bk_blockhash_add(b, p + off, len, NULL), 0);
		}
		off += len;
	}
}

static void any_pieces_give_the_defined_hash(void **state)
{
	static const size_t sizes[] = { 0, 1, B - 1, B, B + 1, 2 * B, 3 * B - 7 };
	static const size_t pieces[] = { 1000003, B / 2, B, B + 12345, 64 * 1024 };

	(void)state;
	for (size_t i = 0; i < BK_ARRAY_SIZE(sizes); i++) {
		size_t n = sizes[i];
		uint8_t *p = content(n);
		bk_hash want, got;

		reference(p, n, want);
		for (size_t j = 0; j < BK_ARRAY_SIZE(pieces); j++) {
			for (int give = 0; give < 2; give++) {
				bk_blockhash b;

				assert_int_equal(bk_blockhash_init(&b, n), 0);
				add_in_pieces(&b, p, n, pieces[j], give);
				assert_int_equal(bk_blockhash_final(&b, got), 0);
				if (memcmp(got, want, BK_HASH_LEN) != 0)
					fail_msg("size %zu in pieces of %zu (hashes given: %d): another content hash", n,
						 pieces[j], give);
				bk_blockhash_fini(&b);
			}
		}
		free(p);
	}
}

static void empty_content_is_the_hash_of_nothing(void **state)
{
	static const char none[] = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
	char hex[2 * BK_HASH_LEN + 1];
	bk_blockhash b;
	bk_hash h;

	(void)state;
	assert_int_equal(bk_blockhash_init(&b, 0), 0);
	assert_int_equal(bk_blockhash_final(&b, h), 0);
	bk_block_name(h, hex);
	assert_string_equal(hex, none);
	bk_blockhash_fini(&b);
}

static void not_final_before_the_end_nor_past_it(void **state)
{
	uint8_t *p = content(B + 10);
	bk_blockhash b;
	bk_hash h;

	(void)state;
	assert_int_equal(bk_blockhash_init(&b, B + 10), 0);
	assert_int_equal(bk_blockhash_add(&b, p, B, NULL), 0);
	assert_int_equal(bk_blockhash_final(&b, h), -EINVAL);
	/* A hash given for a piece that is not a whole block is refused. */
	assert_false(bk_blockhash_whole(&b, 5));
	assert_int_equal(bk_blockhash_add(&b, p + B, 5, h), -EINVAL);
	assert_int_equal(bk_blockhash_add(&b, p + B, 11, NULL), -EINVAL); /* one past the size */
	assert_true(bk_blockhash_whole(&b, 10));
	assert_int_equal(bk_blockhash_add(&b, p + B, 10, NULL), 0);
	assert_int_equal(bk_blockhash_final(&b, h), 0);
	bk_blockhash_fini(&b);
	free(p);
}

/* docs/PROTOCOL.md's vectors ("Content hash"), recomputed by tests/unit/mac_vectors.py too. */
static void documented_vectors(void **state)
{
	static const struct {
		const char *name;
		size_t zeros;
		const char *tail, *hash;
	} vectors[] = {
		{ "empty", 0, "", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" },
		{ "one block", 0, "hello, world\n", "74743aec8fc3daf7bffe600cdf6848cdd1105671c273733f544caba63dfcba92" },
		{ "two blocks", B, "abc", "3fa6db8310a97daafad66b46d1d89070c4fe821f88b40cb9a06fa9aca84e30ce" },
	};

	(void)state;
	for (size_t i = 0; i < BK_ARRAY_SIZE(vectors); i++) {
		size_t n = vectors[i].zeros + strlen(vectors[i].tail);
		uint8_t *p = calloc(n ? n : 1, 1);
		char hex[2 * BK_HASH_LEN + 1];
		bk_blockhash b;
		bk_hash h;

		assert_non_null(p);
		memcpy(p + vectors[i].zeros, vectors[i].tail, strlen(vectors[i].tail));
		assert_int_equal(bk_blockhash_init(&b, n), 0);
		add_in_pieces(&b, p, n, B, true);
		assert_int_equal(bk_blockhash_final(&b, h), 0);
		bk_block_name(h, hex);
		if (strcmp(hex, vectors[i].hash) != 0)
			fail_msg("content hash of %s: %s, documented %s", vectors[i].name, hex, vectors[i].hash);
		bk_blockhash_fini(&b);
		free(p);
	}
}

static void block_names_are_lowercase_hex(void **state)
{
	bk_hash h;
	char name[2 * BK_HASH_LEN + 1];

	(void)state;
	for (size_t i = 0; i < BK_HASH_LEN; i++)
		h[i] = (uint8_t)(0xf0 + i % 16);
	bk_block_name(h, name);
	assert_int_equal(strlen(name), 64);
	assert_memory_equal(name, "f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff", 32);
	assert_int_equal(bk_blocks_of(0), 0);
	assert_int_equal(bk_blocks_of(1), 1);
	assert_int_equal(bk_blocks_of(B), 1);
	assert_int_equal(bk_blocks_of(B + 1), 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(any_pieces_give_the_defined_hash),
		cmocka_unit_test(empty_content_is_the_hash_of_nothing),
		cmocka_unit_test(not_final_before_the_end_nor_past_it),
		cmocka_unit_test(documented_vectors),
		cmocka_unit_test(block_names_are_lowercase_hex),
	};

	return cmocka_run_group_tests_name("contenthash", tests, NULL, NULL);
}
