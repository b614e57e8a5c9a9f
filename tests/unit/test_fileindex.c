/* Unit tests of server/files/fileindex.c: a version of a file is known once all its blocks are in,
 * only for that very version (another size, mtime or ctime of the inode is not it), replaced by
 * a newer version's notes, and the index keeps within its byte bound. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <errno.h>

#include "files/fileindex.h"
#include "support.h"

static bk_filever version(uint64_t ino, uint64_t size, int64_t ctime_ns)
{
	return (bk_filever){ .dev = 8, .ino = ino, .size = size, .mtime_ns = 1000, .ctime_ns = ctime_ns };
}

static void block(bk_hash h, uint8_t tag)
{
	memset(h, tag, BK_HASH_LEN);
}

static void known_once_every_block_is_in(void **state)
{
	bk_fileindex *ix = bk_fileindex_new(1 << 20);
	bk_filever v = version(1, 3 * BK_BLOCK_SIZE - 1, 5);
	bk_hash h[3], got, want, blocks[3];

	(void)state;
	for (int k = 0; k < 3; k++)
		block(h[k], (uint8_t)(0x10 + k));
	assert_int_equal(bk_content_hash(h, 3, want), 0);
	bk_fileindex_note(ix, &v, 2, h[2]);
	bk_fileindex_note(ix, &v, 0, h[0]);
	assert_int_equal(bk_fileindex_get(ix, &v, got, NULL), -ENOENT);
	bk_fileindex_note(ix, &v, 0, h[0]); /* the same block again changes nothing */
	bk_fileindex_note(ix, &v, 7, h[0]); /* nor one past the end */
	assert_int_equal(bk_fileindex_get(ix, &v, got, NULL), -ENOENT);
	bk_fileindex_note(ix, &v, 1, h[1]);
	assert_int_equal(bk_fileindex_get(ix, &v, got, blocks), 0);
	assert_memory_equal(got, want, BK_HASH_LEN);
	assert_memory_equal(blocks, h, sizeof(h));
	bk_fileindex_free(ix);
}

static void only_that_version_is_known(void **state)
{
	bk_fileindex *ix = bk_fileindex_new(1 << 20);
	bk_filever v = version(2, 10, 5), w;
	bk_hash h, got;

	(void)state;
	block(h, 0x33);
	bk_fileindex_put(ix, &v, &h);
	assert_int_equal(bk_fileindex_get(ix, &v, got, NULL), 0);
	w = v, w.ctime_ns++;
	assert_int_equal(bk_fileindex_get(ix, &w, got, NULL), -ENOENT);
	w = v, w.mtime_ns--;
	assert_int_equal(bk_fileindex_get(ix, &w, got, NULL), -ENOENT);
	w = v, w.size++;
	assert_int_equal(bk_fileindex_get(ix, &w, got, NULL), -ENOENT);
	w = v, w.dev++;
	assert_int_equal(bk_fileindex_get(ix, &w, got, NULL), -ENOENT);
	/* A note for a newer version of the inode replaces what was known of the old one. */
	w = v, w.ctime_ns = 6;
	bk_fileindex_note(ix, &w, 0, h);
	assert_int_equal(bk_fileindex_get(ix, &v, got, NULL), -ENOENT);
	assert_int_equal(bk_fileindex_get(ix, &w, got, NULL), 0);
	bk_fileindex_free(ix);
}

static void an_empty_file_is_known_at_once(void **state)
{
	static const char none_of_none[] = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
	bk_fileindex *ix = bk_fileindex_new(1 << 20);
	bk_filever v = version(3, 0, 5);
	char hex[2 * BK_HASH_LEN + 1];
	bk_hash got;

	(void)state;
	bk_fileindex_put(ix, &v, NULL);
	assert_int_equal(bk_fileindex_get(ix, &v, got, NULL), 0);
	bk_block_name(got, hex);
	assert_string_equal(hex, none_of_none);
	bk_fileindex_free(ix);
}

static void the_bound_drops_the_least_recently_used(void **state)
{
	/* Room for about three one-block entries. */
	bk_fileindex *ix = bk_fileindex_new(3 * 200);
	bk_hash h, got;

	(void)state;
	block(h, 0x44);
	for (uint64_t ino = 10; ino < 13; ino++) {
		bk_filever v = version(ino, 1, 1);
		bk_fileindex_put(ix, &v, &h);
	}
	bk_filever first = version(10, 1, 1), second = version(11, 1, 1);
	assert_int_equal(bk_fileindex_get(ix, &first, got, NULL), 0); /* used: now the newest */
	for (uint64_t ino = 13; ino < 15; ino++) {
		bk_filever v = version(ino, 1, 1);
		bk_fileindex_put(ix, &v, &h);
	}
	assert_int_equal(bk_fileindex_get(ix, &first, got, NULL), 0);
	assert_int_equal(bk_fileindex_get(ix, &second, got, NULL), -ENOENT);
	/* An entry larger than the whole bound is not kept at all. */
	bk_filever huge = version(99, 1000ull * BK_BLOCK_SIZE, 1);
	bk_fileindex_note(ix, &huge, 0, h);
	assert_int_equal(bk_fileindex_get(ix, &first, got, NULL), 0);
	bk_fileindex_free(ix);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(known_once_every_block_is_in),
		cmocka_unit_test(only_that_version_is_known),
		cmocka_unit_test(an_empty_file_is_known_at_once),
		cmocka_unit_test(the_bound_drops_the_least_recently_used),
	};

	return cmocka_run_group_tests_name("fileindex", tests, NULL, NULL);
}
